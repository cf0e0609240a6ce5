"""The node-side core runs on Python 3.9 (the oldest node Python supported), where one is installed."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, tiny_cpu_config


def python39() -> str | None:
    for candidate in [
        shutil.which("python3.9"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.9*/bin/python3.9"))),
    ]:
        if not candidate:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 9))"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.stdout.strip() == "True":
            return candidate
    return None


PY39 = python39()
pytestmark = pytest.mark.skipif(PY39 is None, reason="no Python 3.9 on this machine")


@pytest.mark.slow
def test_list_and_the_stdlib_checks_run_on_python39(tmp_path: Path) -> None:
    assert PY39 is not None
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    listed = subprocess.run(
        [PY39, "-m", "validators", "list", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) >= 19
    config = tmp_path / "node.json"
    config.write_text(json.dumps(tiny_cpu_config(tmp_path)))
    proc = subprocess.run(
        [
            PY39,
            "-m",
            "validators",
            "run",
            "--profile",
            "quick",
            "--config",
            str(config),
            "--out",
            str(tmp_path / "out"),
            "--checks",
            "python-runtime,software-versions,shared-storage,xid-scan",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {c["id"]: c["status"] for c in report["checks"]}["shared-storage"] == "pass"
