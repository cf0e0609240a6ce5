"""`upgrade` end to end over fakes: a pinned driver bumped in the spec, rolled out batch by batch."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest
from rich.console import Console

from clusterforge.journal import Journal
from clusterforge.plan.inputs import stack_inputs
from clusterforge.plan.rollout import UPGRADING_REASON
from clusterforge.rollout.cluster_steps import ClusterSteps
from clusterforge.rollout.upgrade import upgrade
from clusterforge.status import collect, table
from tests.pipeline.fakes import FakeSlurm
from tests.rollout.conftest import COMPUTE, ROOT, with_driver

# slow: every test runs `invoke upgrade` end to end: ansible-playbook on local-connection nodes
pytestmark = pytest.mark.slow

NEW = "535.309.01"


def run(world: dict, spec=None, **kwargs):
    out = io.StringIO()
    outcome = upgrade(
        spec or with_driver(world["spec"], NEW),
        console=Console(file=out, width=250),
        seams=world["seams"],
        **kwargs,
    )
    return outcome, out.getvalue()


def drains(slurm: FakeSlurm) -> list[str]:
    return [
        c[2].removeprefix("NodeName=")
        for c in slurm.calls
        if c[:2] == ["scontrol", "update"] and f"Reason={UPGRADING_REASON}" in c
    ]


def versions(world: dict) -> dict[str, str]:
    journal = Journal(world["spec"].stack)
    return {n: journal.record(n).versions.get("nvidia_driver_version", "") for n in COMPUTE}


def test_each_node_drained_upgraded_recertified_and_resumed_in_turn(world: dict) -> None:
    slurm: FakeSlurm = world["slurm"]
    states_at_drain: list[dict[str, str]] = []
    original = slurm._answer

    def answer(argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        if argv[:2] == ["scontrol", "update"] and f"Reason={UPGRADING_REASON}" in argv:
            states_at_drain.append({n: s["state"] for n, s in slurm.nodes.items()})
        return original(argv, stdin)

    slurm._answer = answer  # type: ignore[method-assign]
    outcome, text = run(world)
    assert outcome.code == 0, text
    assert drains(slurm) == list(COMPUTE)  # batch 1 each, in order
    # When a node is drained, every other node is back in service (max_unavailable 1).
    assert states_at_drain == [dict.fromkeys(COMPUTE, "idle")] * 3
    assert {n: s["state"] for n, s in slurm.nodes.items()} == dict.fromkeys(COMPUTE, "idle")
    assert slurm.reservation is None
    assert versions(world) == dict.fromkeys(COMPUTE, NEW)
    assert "upgraded" in text and "converged, re-certified, serving" in text
    rows = collect(outcome_spec(world), world["provider"], slurm.runner)
    assert {r.node: r.certification for r in rows if r.role == "gpu"} == dict.fromkeys(COMPUTE, "certified")
    # Done: the next upgrade has nothing to do and touches nothing.
    slurm.calls.clear()
    again, text = run(world)
    assert again.code == 0 and "nothing to upgrade" in text
    assert not any(c[0] == "scontrol" and c[1] == "update" for c in slurm.calls)


def test_second_batch_failing_recertification_stops_the_rollout(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CF_TEST_FAIL_CERT", "node-002")
    slurm: FakeSlurm = world["slurm"]
    outcome, text = run(world)
    assert outcome.code == 1
    assert drains(slurm) == ["node-001", "node-002"]  # node-003 never touched
    assert slurm.nodes["node-001"]["state"] == "idle"
    assert slurm.nodes["node-002"] == {
        "state": "drained",
        "reason": "clusterforge: software-versions: nccl: 2.18.1 installed, 2.26.2 pinned",
    }
    assert slurm.nodes["node-003"]["state"] == "idle"
    assert "rollout stopped: batch 2: node-002 failed" in text
    assert "rollout stopped before its batch: serving, old version" in text
    # status shows the mixed versions: node-001 on the new driver, node-003 on the old one
    rows = {r.node: r for r in collect(outcome_spec(world), world["provider"], slurm.runner)}
    assert rows["node-001"].versions == f"nvidia_driver_version={NEW}"
    assert rows["node-003"].versions == "nvidia_driver_version=535.261.03"
    out = io.StringIO()
    Console(file=out, width=200).print(table(world["spec"], list(rows.values())))
    assert "versions" in out.getvalue() and NEW in out.getvalue()
    # Fixed: the same rollout resumes; node-001 is not redone, node-002 (out of service) first.
    monkeypatch.setenv("CF_TEST_FAIL_CERT", "")
    slurm.calls.clear()
    again, text = run(world)
    assert again.code == 0, text
    assert drains(slurm) == ["node-003"]  # node-002 was out of service already: no drain
    assert versions(world) == dict.fromkeys(COMPUTE, NEW)
    assert {n: s["state"] for n, s in slurm.nodes.items()} == dict.fromkeys(COMPUTE, "idle")
    rows = collect(outcome_spec(world), world["provider"], slurm.runner)
    assert all(r.versions == "" for r in rows)  # one version everywhere again


def outcome_spec(world: dict):
    return with_driver(world["spec"], NEW)


def test_interrupted_rollout_resumes_where_it_stopped(world: dict) -> None:
    slurm: FakeSlurm = world["slurm"]

    class Interrupted(ClusterSteps):
        def recertify(self, nodes: Sequence[str]) -> dict[str, str]:
            if "node-002" in nodes:
                raise KeyboardInterrupt
            return super().recertify(nodes)

    outcome, text = run(world, steps_factory=Interrupted)
    assert outcome.code == 130, text
    assert slurm.nodes["node-002"] == {"state": "drained", "reason": UPGRADING_REASON}
    record = Journal(world["spec"].stack).section("rollout")
    assert record["finished"] == ["node-001"] and record["stopped"] == "interrupted"
    slurm.calls.clear()
    again, text = run(world)
    assert again.code == 0, text
    assert "resuming rollout" in text
    assert drains(slurm) == ["node-003"]  # node-001 done before; node-002 needs no new drain
    assert versions(world) == dict.fromkeys(COMPUTE, NEW)
    assert Journal(world["spec"].stack).section("rollout")["finished"] == list(COMPUTE)


def test_dry_run_changes_nothing_and_a_new_node_is_refused(world: dict) -> None:
    slurm: FakeSlurm = world["slurm"]
    outcome, text = run(world, dry_run=True)
    assert outcome.code == 0 and outcome.plan is not None
    assert [b.nodes for b in outcome.plan.batches] == [("node-001",), ("node-002",), ("node-003",)]
    assert not any(c[:2] == ["scontrol", "update"] for c in slurm.calls)
    assert "nvidia_driver_version 535.261.03 -> 535.309.01" in text
    # --base: what the nodes run taken from elsewhere (a git revision on a CI runner without the
    # journal); here a base that already has the new driver leaves nothing to do.
    target = with_driver(world["spec"], NEW)
    same, text = run(world, dry_run=True, base=stack_inputs(target, ROOT, "base"))
    assert same.code == 0 and "nothing to upgrade" in text
    pools = [p.model_copy(update={"count": 4}) if p.role == "gpu" else p for p in world["spec"].node_pools]
    bigger = world["spec"].model_copy(update={"node_pools": pools})
    refused, text = run(world, spec=bigger)
    assert refused.code == 2 and "node-004: create" in text and "invoke up" in text


def test_drain_timeout_resumes_the_busy_node_untouched_and_stops(world: dict) -> None:
    slurm: FakeSlurm = world["slurm"]
    original = slurm._answer

    def answer(argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        # node-001 runs job 41 that outlives the drain: Slurm shows it draining, squeue lists it.
        if argv[0] == "squeue":
            return 0, "41 node-001\n", ""
        rc, out, err = original(argv, stdin)
        if argv[0] == "sinfo":
            out = out.replace("node-001 drained", "node-001 draining")
        return rc, out, err

    slurm._answer = answer  # type: ignore[method-assign]
    world["spec"] = world["spec"].model_copy(
        update={"rollout": world["spec"].rollout.model_copy(update={"drain_timeout_s": 0})}
    )
    outcome, text = run(world)
    assert outcome.code == 1
    assert drains(slurm) == ["node-001"]
    assert "drain timed out after 0 s: job(s) 41 still running" in text
    assert slurm.nodes["node-001"]["state"] == "idle"  # resumed, untouched
    assert versions(world)["node-001"] == ""
