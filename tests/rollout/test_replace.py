"""`replace` over fakes: refusals, a new machine certified and admitted, identity and bad-GPU history."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from clusterforge.journal import Journal
from clusterforge.node.report_model import NodeReport
from clusterforge.providers.base import Node, PlannedNode
from clusterforge.rollout.identity import gpu_ids, record_replacement
from clusterforge.rollout.replace import REPLACING_REASON, replace
from clusterforge.status import collect
from tests.pipeline.fakes import FakeProvider, FakeSlurm

# slow: every test runs `invoke replace` end to end: ansible-playbook on local-connection nodes
pytestmark = pytest.mark.slow

UUID_A = "GPU-8a1b2c3d-0000-1111-2222-333344445555"


class Replacing(FakeProvider):
    """A provider that can put one node on a new machine (a new provider id, like a new instance)."""

    def __init__(self) -> None:
        super().__init__()
        self.generation: dict[str, int] = {}
        self.replaced: list[str] = []

    def _node(self, p: PlannedNode, i: int) -> Node:
        node = super()._node(p, i)
        gen = self.generation.get(p.name, 0)
        return Node(**{**node.__dict__, "provider_id": f"id-{p.name}-{gen}"})

    def replace_node(self, spec, node: str, progress) -> None:
        self.generation[node] = self.generation.get(node, 0) + 1
        self.replaced.append(node)


def run(world: dict, node: str, **kwargs):
    out = io.StringIO()
    outcome = replace(
        world["spec"], node, yes=True, console=Console(file=out, width=250), seams=world["seams"], **kwargs
    )
    return outcome, out.getvalue()


@pytest.fixture
def replacing(world: dict) -> dict:
    """The same fake stack, behind a provider that can replace a machine."""
    provider = Replacing()
    provider.states = dict(world["provider"].states)
    world["seams"].provider = provider
    journal = Journal(world["spec"].stack)
    for name in provider.states:  # the machines `up` saw were generation 0 of this provider
        journal.annotate(name, provider_id=f"id-{name}-0")
    world["provider"] = provider
    return world


def test_refusals(world: dict) -> None:
    slurm: FakeSlurm = world["slurm"]
    outcome, text = run(world, "node-009")
    assert outcome.code == 2 and "not a node of the spec" in text and "node-001, node-002, node-003" in text
    outcome, text = run(world, "head-001")
    assert outcome.code == 2 and "a head node" in text
    # FakeProvider has no replace_node and is not the local provider: refused before any drain.
    outcome, text = run(world, "node-002")
    assert outcome.code == 2 and "cannot replace one node" in text and "replace_node" in text
    assert not any(c[:2] == ["scontrol", "update"] for c in slurm.calls)


def test_the_only_node_of_its_pool_in_service_needs_force(replacing: dict) -> None:
    slurm: FakeSlurm = replacing["slurm"]
    for name in ("node-001", "node-003"):  # a person drained these
        slurm.nodes[name].update(state="drained", reason="bad fan, ticket 42")
    outcome, text = run(replacing, "node-002")
    assert outcome.code == 2 and "only node of pool 'node' in service" in text and "--force" in text
    assert replacing["provider"].replaced == []
    forced, text = run(replacing, "node-002", force=True)
    assert forced.code == 0, text
    assert replacing["provider"].replaced == ["node-002"]
    assert slurm.nodes["node-001"]["reason"] == "bad fan, ticket 42"  # a person's drain is left alone


def test_a_new_machine_is_configured_certified_admitted_and_journalled(replacing: dict) -> None:
    slurm: FakeSlurm = replacing["slurm"]
    outcome, text = run(replacing, "node-002")
    assert outcome.code == 0, text
    drain = ["scontrol", "update", "NodeName=node-002", "State=DRAIN", f"Reason={REPLACING_REASON}"]
    assert drain in slurm.calls
    assert slurm.nodes["node-002"]["state"] == "idle" and slurm.reservation is None
    assert outcome.old["provider_id"] == "id-node-002-0" and outcome.new["provider_id"] == "id-node-002-1", (
        text
    )
    assert "old machine id-node-002-0" in text and "new machine id-node-002-1" in text
    journal = Journal(replacing["spec"].stack)
    rec = journal.record("node-002")
    assert rec.verdict == "pass" and rec.provider_id == "id-node-002-1"
    assert rec.hardware["provider_id"] == "id-node-002-1"
    assert rec.versions == {"nvidia_driver_version": "535.261.03", "slurm_version": "22.05.8"}
    (entry,) = journal.section("replacements")
    assert entry["node"] == "node-002" and entry["old"]["provider_id"] == "id-node-002-0"
    beside = replacing["tmp"] / "state" / "pt-roll" / "reports" / "node-002" / "replacements.json"
    assert json.loads(beside.read_text()) == [entry]
    # the other nodes were not certified again
    assert journal.record("node-001").provider_id == "id-node-001-0"


def test_gpu_ids_from_the_inventory_check_and_the_same_bad_gpu_handed_back(replacing: dict) -> None:
    captured = json.loads(
        (Path(__file__).resolve().parents[1] / "data/validators-report/local-quick.json").read_text()
    )
    entry = {"status": "pass", "summary": "ok", "metrics": {}, "threshold": {}}
    report = {**captured, "checks": [
        {**entry, "id": "gpu-inventory",
         "evidence": {"command": "nvidia-smi -q -x", "lines": [f"GPU 0 (00000000:53:00.0): NVIDIA H100 80GB HBM3 {UUID_A}",
                                                              "GPU 1 serial number: 1654922001234"]}},
        {**entry, "id": "gpu-health", "evidence": {"command": None, "lines": ["GPU-ffffffff-0000-1111-2222-333344445555"]}},
    ]}  # fmt: skip
    assert gpu_ids(NodeReport.parse(report).checks) == [UUID_A, "serial 1654922001234"]
    journal = Journal(replacing["spec"].stack)
    old = {"provider_id": "i-0aaa", "gpus": [UUID_A]}
    record_replacement(
        journal,
        "node-003",
        old,
        {"provider_id": "i-0bbb", "gpus": []},
        "fail",
        "clusterforge: gpu-health: GPU 0: 3 ECC",
    )
    # Later node-001 comes back on a machine holding that GPU.
    path = replacing["tmp"] / "node-001-report.json"
    path.write_text(json.dumps(report))
    journal.annotate("node-001", report=str(path), run_id="")
    rows = {r.node: r for r in collect(replacing["spec"], replacing["provider"], replacing["slurm"].runner)}
    assert rows["node-001"].flags.startswith(f"GPU {UUID_A} was on node-003 (i-0aaa) when it failed")
    assert "3 ECC" in rows["node-001"].flags
    assert rows["node-002"].flags == ""
