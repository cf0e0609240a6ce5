"""A stack over fakes (tests/pipeline/fakes.py): local-connection nodes, the pipeline's stand-in
playbooks run by the real ansible-runner, a fake Slurm head node. `up` has run once."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from clusterforge.pipeline.context import Options
from clusterforge.pipeline.up import Seams, up
from clusterforge.spec.loader import load_spec
from clusterforge.spec.models import ClusterSpec
from tests.pipeline.fakes import FakeProvider, FakeSlurm

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "tests" / "pipeline" / "playbooks"
COMPUTE = ("node-001", "node-002", "node-003")


def with_driver(spec: ClusterSpec, version: str) -> ClusterSpec:
    """The spec with another pinned driver version (what a pull request bumping it changes)."""
    driver = spec.software.driver.model_copy(update={"version": version})
    return spec.model_copy(update={"software": spec.software.model_copy(update={"driver": driver})})


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    for var in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TMP"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("CF_TEST_WORK", str(tmp_path))
    for var in ("CF_TEST_FAIL_CONFIGURE", "CF_TEST_FAIL_CERT", "CF_TEST_DIE", "CF_TEST_HEAD_LAST"):
        monkeypatch.setenv(var, "")
    spec, _ = load_spec(ROOT / "stacks" / "local.yaml")
    pools = [p.model_copy(update={"count": len(COMPUTE)}) if p.role == "gpu" else p for p in spec.node_pools]
    spec = spec.model_copy(update={"stack": "pt-roll", "node_pools": pools})
    slurm = FakeSlurm()
    for name in COMPUTE:
        slurm.register(name)
    provider = FakeProvider()
    seams = Seams(provider=provider, playbooks=PLAYBOOKS, runner=slurm.runner, inventories=tmp_path / "inv")
    first = up(spec, Options(), console=Console(file=io.StringIO(), width=200), seams=seams)
    assert first.code == 0
    assert {n: s["state"] for n, s in slurm.nodes.items()} == dict.fromkeys(COMPUTE, "idle")
    slurm.calls.clear()
    return {"spec": spec, "slurm": slurm, "provider": provider, "seams": seams, "tmp": tmp_path}
