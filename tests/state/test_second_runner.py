"""Two runners, one cluster, its state in a shared backend: what one `up` converged and certified,
a second checkout (no journal, no baselines, no inventory of its own) plans against, judges with,
and certifies from; each holds the lock. Over the pipeline's fakes (local-connection nodes, the
stand-in playbooks run by the real ansible-runner, a fake Slurm head): no containers."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from clusterforge.journal import Journal
from clusterforge.pipeline.context import Options
from clusterforge.pipeline.up import Seams, certify, up
from clusterforge.plan.sources import base_from_journal
from clusterforge.spec.loader import load_spec
from clusterforge.spec.models import State
from clusterforge.state import changing, reading
from clusterforge.state.fsdir import DirectoryBackend
from clusterforge.state.snapshot import StackState
from tests.pipeline.fakes import FakeProvider, FakeSlurm

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "tests" / "pipeline" / "playbooks"

pytestmark = pytest.mark.slow  # ansible-playbook runs


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    for var in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TMP"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("CF_TEST_WORK", str(tmp_path))
    for var in ("CF_TEST_FAIL_CONFIGURE", "CF_TEST_FAIL_CERT", "CF_TEST_DIE", "CF_TEST_HEAD_LAST"):
        monkeypatch.setenv(var, "")
    shared = tmp_path / "shared-state"
    shared.mkdir()
    spec, _ = load_spec(ROOT / "stacks" / "local.yaml")
    pools = [p.model_copy(update={"count": 3}) if p.role == "gpu" else p for p in spec.node_pools]
    spec = spec.model_copy(
        update={
            "stack": "pt-two",
            "node_pools": pools,
            "state": State.model_validate({"backend": str(shared)}),
        }
    )
    slurm = FakeSlurm()
    for name in ("node-001", "node-002", "node-003"):
        slurm.register(name)
    return {"spec": spec, "slurm": slurm, "provider": FakeProvider(), "tmp": tmp_path, "shared": shared}


def runner(c: dict, name: str, monkeypatch: pytest.MonkeyPatch) -> Seams:
    """A checkout of its own: its own .clusterforge and inventories."""
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(c["tmp"] / name / ".clusterforge"))
    return Seams(
        provider=c["provider"],
        playbooks=PLAYBOOKS,
        runner=c["slurm"].runner,
        inventories=c["tmp"] / name / "inv",
    )


def test_a_second_checkout_sees_the_applied_state_and_baselines_and_certifies(
    cluster: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, slurm = cluster["spec"], cluster["slurm"]
    seams = runner(cluster, "ci", monkeypatch)
    with changing(spec, "invoke up --stack pt-two", note=lambda _: None):
        first = up(spec, Options(), console=Console(file=io.StringIO(), width=200), seams=seams)
    assert first.code == 0
    written = StackState(DirectoryBackend(cluster["shared"]), "pt-two").read()
    assert written is not None and any(p.startswith("baselines/") for p in written.objects)

    seams = runner(cluster, "laptop", monkeypatch)
    assert not (cluster["tmp"] / "laptop").exists()  # nothing of the stack here yet
    with reading(spec):  # `plan`: the applied state, from the backend, without the lock
        applied = base_from_journal(Journal("pt-two"))
    assert sorted(applied.nodes) == ["head-001", "node-001", "node-002", "node-003"]
    slurm.slow = {"node-001"}
    out = io.StringIO()
    with changing(spec, "invoke certify --stack pt-two --nodes node-001", note=lambda _: None):
        result = certify(spec, ["node-001"], None, console=Console(file=out, width=200), seams=seams)
    assert result.code == 1, out.getvalue()
    reason = slurm.nodes["node-001"]["reason"]
    # judged with known-good partners the journal names, against the baseline the first runner stored
    assert reason.startswith("clusterforge: gloo-allreduce:") and "baseline" in reason, reason
    assert (cluster["tmp"] / "laptop" / "inv" / "pt-two" / "hosts.yml").exists()  # rendered for this runner
    now = StackState(DirectoryBackend(cluster["shared"]), "pt-two").read()
    assert now is not None and now.serial > written.serial
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(cluster["tmp"] / "third" / ".clusterforge"))
    with reading(spec):
        assert Journal("pt-two").record("node-001").verdict == "fail"
