"""The node-side probe: its parsers on captured output, and the probe itself on this machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterforge.drift import probe
from clusterforge.drift.digest import PROBE_SOURCE, parse_probe

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize(
    ("case", "hello"),
    [
        ("installed", "install installed 2.10-3"),
        ("held", "hold installed 2.10-3"),
        ("unheld", "install installed 2.10-3"),
        ("not-installed-held", "hold not-installed"),
    ],
)
def test_parse_dpkg_on_captures(case: str, hello: str) -> None:
    assert probe.parse_dpkg((DATA / "dpkg-query" / f"{case}.txt").read_text())["hello"] == hello


def test_parse_dpkg_leaves_out_what_dpkg_does_not_know() -> None:
    found = probe.parse_dpkg((DATA / "dpkg-query" / "missing.txt").read_text())
    assert "nvidia-smi" not in found and "hello" in found


@pytest.mark.parametrize(
    ("case", "state"),
    [
        ("enabled-active", "enabled active"),
        ("enabled-inactive", "enabled inactive"),
        ("not-found", "not-found"),
    ],
)
def test_parse_unit_on_captures(case: str, state: str) -> None:
    assert probe.parse_unit((DATA / "systemctl-show" / f"{case}.txt").read_text()) == state


def test_probe_runs_as_python_c_and_reports_what_it_cannot_read(tmp_path: Path) -> None:
    managed = tmp_path / "managed.conf"
    managed.write_text("a = 1\n")
    want = {"packages": [], "files": [str(managed), str(tmp_path / "gone")], "units": []}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE_SOURCE, json.dumps(want)], capture_output=True, text=True, check=False
    )
    got = parse_probe(proc.returncode, proc.stdout, proc.stderr)
    assert got.ok, got.error
    assert got.items[f"file {tmp_path / 'gone'}"] == "absent"
    before = got.items[f"file {managed}"]
    assert before.startswith("sha256 ") and " mode 0" in before
    managed.write_text("a = 2\n")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE_SOURCE, json.dumps(want)], capture_output=True, text=True, check=False
    )
    assert parse_probe(proc.returncode, proc.stdout, proc.stderr).items[f"file {managed}"] != before


def test_probe_errors_make_a_digest_not_gathered() -> None:
    text = json.dumps({"items": {"unit slurmd": "x"}, "errors": ["systemctl show slurmd exited 1: no bus"]})
    assert not parse_probe(0, text, "").ok
    assert "exited 127" in parse_probe(127, "", "python3: not found").error
    assert not parse_probe(0, "Traceback ...", "").ok
