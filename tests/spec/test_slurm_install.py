"""software.slurm_install: how the slurm role installs software.slurm (package or source)."""

from __future__ import annotations

import re
from pathlib import Path

from clusterforge.inventory import render_inventory
from clusterforge.spec.checks import check_file
from clusterforge.spec.loader import load_spec
from tests.pipeline.test_inventory import local_nodes

STACKS = Path(__file__).resolve().parents[2] / "stacks"
SHA = "8c8f6a26a5d51e6c63773f2e02653eb724540ee8b360125c8d7732314ce737d6"


# dev.yaml's block: "  slurm_install:" and its more-indented lines.
_BLOCK = re.compile(r"^  slurm_install:.*\n(?:    .*\n)*", re.MULTILINE)


def _dev_with(tmp_path: Path, install: str) -> Path:
    text = (STACKS / "dev.yaml").read_text()
    assert len(_BLOCK.findall(text)) == 1
    path = tmp_path / "dev-variant.yaml"
    path.write_text(_BLOCK.sub(f"  slurm_install: {install}\n", text))
    return path


def test_default_is_the_distribution_packages_and_renders_nothing() -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    assert spec.software.slurm_install.method == "package"
    slurm = render_inventory(spec, local_nodes(1), Path("/x/munge.key")).group_vars["slurm"]
    assert not any(key.startswith(("slurm_install", "slurm_source")) for key in slurm)


def test_a_bad_method_is_named_with_the_choices(tmp_path: Path) -> None:
    report = check_file(_dev_with(tmp_path, "{method: sources}"))
    [error] = report.errors
    assert error.check_id == "schema-invalid-value"
    assert error.path == "software.slurm_install.method" and error.line
    assert error.message == "Input should be 'package' or 'source' (got 'sources')"


def test_a_sha256_that_is_not_64_hex_is_refused(tmp_path: Path) -> None:
    report = check_file(_dev_with(tmp_path, "{method: source, sha256: abc123}"))
    assert [e.check_id for e in report.errors] == ["schema-invalid-value"]
    assert report.errors[0].path == "software.slurm_install.sha256"
    assert "'^[0-9a-f]{64}$' (got 'abc123')" in report.errors[0].message


def test_source_renders_the_role_inputs(tmp_path: Path) -> None:
    url = "https://mirror.example.invalid/slurm-24.05.7.tar.bz2"
    spec, _ = load_spec(_dev_with(tmp_path, f"{{method: source, sha256: {SHA}, source_url: '{url}'}}"))
    inv = render_inventory(spec, local_nodes(1), Path("/state/dev/munge.key"))
    slurm = inv.group_vars["slurm"]
    assert (slurm["slurm_install_method"], slurm["slurm_source_sha256"]) == ("source", SHA)
    assert slurm["slurm_source_url"] == url
    assert slurm["slurm_source_cache_dir"] == "/state/dev/slurm-builds"
    assert inv.group_vars["pyxis"]["pyxis_slurm_include_dir"] == "/usr/local/include"
