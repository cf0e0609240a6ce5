"""The pipeline tests' world: a 3-node local spec, fake provider and Slurm head, stand-in playbooks."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.pipeline.up import Seams
from clusterforge.spec.loader import load_spec
from tests.pipeline.fakes import FakeProvider, FakeSlurm

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    for var in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TMP"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("CF_TEST_WORK", str(tmp_path))
    monkeypatch.setenv("CF_TEST_FAIL_CONFIGURE", "")
    monkeypatch.setenv("CF_TEST_FAIL_CERT", "")
    monkeypatch.setenv("CF_TEST_DIE", "")
    monkeypatch.setenv("CF_TEST_HEAD_LAST", "")
    spec, _ = load_spec(ROOT / "stacks" / "local.yaml")
    pools = [p.model_copy(update={"count": 3}) if p.role == "gpu" else p for p in spec.node_pools]
    spec = spec.model_copy(update={"stack": "pt-up", "node_pools": pools})
    slurm = FakeSlurm()
    for name in ("node-001", "node-002", "node-003"):
        slurm.register(name)
    provider = FakeProvider()
    seams = Seams(provider=provider, playbooks=PLAYBOOKS, runner=slurm.runner, inventories=tmp_path / "inv")
    return {"spec": spec, "slurm": slurm, "provider": provider, "seams": seams, "tmp": tmp_path}
