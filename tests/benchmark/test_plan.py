"""Certified idle nodes only; skipped node counts say why (clusterforge/benchmark/plan.py)."""

from __future__ import annotations

import pytest

from clusterforge.benchmark.plan import Candidate, PlanError, make_plan, parse_counts, parse_workloads
from clusterforge.slurm.parse import parse_sinfo

SINFO = """\
node-001 idle none
node-002 idle none
node-003 drained clusterforge: matmul-burnin: 11.4 GFLOP/s, 75 % under the fleet median
node-004 idle$ none
node-005 allocated none
node-006 idle* none
node-007 idle none
"""


def cand(name: str, **kw: object) -> Candidate:
    base = {
        "instance_type": "local",
        "running": True,
        "certified": True,
        "certifying": False,
        "verdict": "pass",
    }
    return Candidate(name, **{**base, **kw})  # type: ignore[arg-type]


def fleet() -> list[Candidate]:
    return [
        cand("node-001"), cand("node-002"), cand("node-003"), cand("node-004"), cand("node-005"), cand("node-006"),
        cand("node-007", certified=False, verdict="fail", reason="software-versions: slurmd not held"),
        cand("node-008", running=False), cand("node-009", certifying=True),
    ]  # fmt: skip


def test_only_certified_idle_nodes_are_eligible_and_each_other_is_named() -> None:
    plan = make_plan(["train"], [1, 2], fleet(), parse_sinfo(SINFO))
    assert plan.eligible == ("node-001", "node-002")
    assert plan.excluded == {
        "node-003": "drained (clusterforge: matmul-burnin: 11.4 GFLOP/s, 75 % under the fleet median)",
        "node-004": "held in a maintenance reservation (certification)",
        "node-005": "busy (sinfo allocated)",
        "node-006": "not answering the controller (sinfo idle*)",
        "node-007": "not certified (failed: software-versions: slurmd not held)",
        "node-008": "not running",
        "node-009": "under certification",
    }
    assert [r.nodes for r in plan.runs] == [("node-001",), ("node-001", "node-002")]


def test_counts_beyond_the_eligible_nodes_are_skipped_with_the_reason() -> None:
    plan = make_plan(["train", "infer"], [1, 2, 4], fleet(), parse_sinfo(SINFO))
    assert [(s.workload, s.count) for s in plan.skipped] == [("train", 4)]
    reason = plan.skipped[0].reason
    assert reason.startswith("needs 4 certified idle nodes; 2 are (node-001, node-002); ")
    assert "node-009 under certification" in reason and "node-003 drained (" in reason
    assert [r.key for r in plan.runs] == ["train-1n", "train-2n", "infer-1n"]


def test_training_always_measures_one_node() -> None:
    plan = make_plan(["train"], [2], fleet(), parse_sinfo(SINFO))
    assert [r.count for r in plan.runs] == [1, 2]
    assert any("1 node added" in n for n in plan.notes)


def test_many_excluded_nodes_are_grouped_in_a_short_line() -> None:
    cands = [cand(f"node-{i:04d}") for i in range(1, 4097)]
    sinfo = parse_sinfo("\n".join(f"node-{i:04d} drained clusterforge: upgrading" for i in range(1, 4097)))
    plan = make_plan(["train"], [1], cands, sinfo)
    (skip,) = plan.skipped
    assert (
        "node-0001, node-0002, node-0003, node-0004, node-0005 and 4091 more drained (clusterforge: upgrading)"
        in skip.reason
    )
    assert len(skip.reason) < 200


def test_runs_stay_on_one_node_type() -> None:
    cands = [cand("a-1", instance_type="p5.48xlarge"), cand("b-1"), cand("b-2")]
    plan = make_plan(["train"], [2], cands, parse_sinfo("a-1 idle none\nb-1 idle none\nb-2 idle none"))
    assert plan.instance_type == "local" and plan.eligible == ("b-1", "b-2")
    assert any("not mixed with 1 p5.48xlarge" in n for n in plan.notes)


def test_option_parsing_errors_name_the_value() -> None:
    assert parse_counts("4, 1,2,2") == [1, 2, 4]
    with pytest.raises(PlanError, match="'two' is not a node count"):
        parse_counts("1,two")
    with pytest.raises(PlanError, match="give at least one"):
        parse_counts(",")
    assert parse_workloads("all") == ["train", "infer", "data"]
    assert parse_workloads("data,train") == ["train", "data"]
    with pytest.raises(PlanError, match="give train, infer, data or all"):
        parse_workloads("training")
