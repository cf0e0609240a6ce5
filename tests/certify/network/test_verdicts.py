"""The network step's judging (verdicts.py): planner verdicts into the certify stage's, pure."""

from __future__ import annotations

from clusterforge.certify.network import verdicts
from clusterforge.certify.network.model import IsolationResult, NodeVerdict, Reference
from clusterforge.certify.network.rounds import GroupRecord, GroupReport, RunLog
from tests.fixtures import reports as fake_reports

CHECK = "gloo-allreduce"


def result(**kinds: str) -> IsolationResult:
    return IsolationResult(
        {n: NodeVerdict(n, k, f"{CHECK}: {k} here") for n, k in kinds.items()},  # type: ignore[arg-type]  # kinds from the test's keywords
        [],
        rounds=1,
        jobs=1,
        references={},
    )


def floor_log(node: str, status: str) -> RunLog:
    entry = fake_reports.check(CHECK, status, summary=f"busbw {status}")
    report = fake_reports.node_report(node, [entry])
    return RunLog(reports={node: [GroupReport(1, (node, "z"), report)]})


def test_a_pass_and_a_reported_link_fault_pass_with_their_reason() -> None:
    res = result(a="pass", b="link-fault")
    assert verdicts.node_verdict("a", res, RunLog(), CHECK).note == "pass here"
    kept = verdicts.node_verdict("b", res, RunLog(), CHECK, drain_links=lambda _: False)
    assert kept.passed and "reported, not drained" in kept.note
    assert not verdicts.node_verdict("b", res, RunLog(), CHECK).passed  # drained by default


def test_undetermined_without_a_reference_is_judged_by_its_own_floor_checks() -> None:
    res = result(a="undetermined")
    assert verdicts.node_verdict("a", res, floor_log("a", "pass"), CHECK).passed
    failed = verdicts.node_verdict("a", res, floor_log("a", "fail"), CHECK)
    assert not failed.passed and failed.first_failure == (CHECK, "busbw fail; undetermined here")
    nothing = verdicts.node_verdict("a", res, RunLog(), CHECK)
    assert nothing.first_failure[1].startswith("no group test of this node reported")


def test_undetermined_with_a_reference_is_held_never_admitted_on_a_guess() -> None:
    res = result(a="undetermined")
    res.references[2] = Reference(2, 0.4, "baseline")
    assert not verdicts.node_verdict("a", res, floor_log("a", "pass"), CHECK).passed


def test_a_malformed_group_report_is_a_failure_naming_it_even_beside_a_good_one() -> None:
    log = floor_log("a", "pass")
    log.malformed["a"] = ["r1-g0/a/report.json: not a validators report: profile: Field required; fix: ..."]
    v = verdicts.node_verdict("a", result(a="undetermined"), log, CHECK)
    assert not v.passed and "malformed: r1-g0/a/report.json" in v.first_failure[1]


def test_no_planner_verdict_is_a_failure() -> None:
    assert not verdicts.node_verdict("x", result(a="pass"), RunLog(), CHECK).passed


def test_only_clean_pairs_of_passed_nodes_enter_the_baseline() -> None:
    log = RunLog(
        records=[
            GroupRecord(1, "screen", ["a", "b"], 0.4, "done"),
            GroupRecord(1, "screen", ["c", "d"], 0.1, "done"),
            GroupRecord(2, "scale", ["a", "b"], 0.4, "done"),
            GroupRecord(1, "screen", ["a", "e"], None, "no report"),
        ]
    )
    res = result(a="pass", b="pass", c="node-fault", d="pass", e="pass")
    assert [r.nodes for r in verdicts.baseline_samples(res, log, {})] == [["a", "b"]]


def test_the_rules_clamp_the_catalogue_gaps() -> None:
    rules = verdicts.isolation_rules(150.0, 0.0, 0.5, CHECK)
    assert (rules.fail_gap, rules.warn_gap, dict(rules.baseline)) == (0.9, 0.01, {2: 0.5})
    assert verdicts.isolation_rules(10.0, 5.0, None, CHECK).baseline == {}
