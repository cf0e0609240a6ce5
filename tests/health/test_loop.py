"""The health loop's rounds against a fake head node that keeps Slurm's rules (tests/health/fake_head.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from clusterforge.health.loop.config import LoopConfig, parse_config
from clusterforge.health.loop.round import REPLACE_REQUESTED, RMA_FLAGGED, run_round
from clusterforge.health.loop.steplog import LOG_FILE, read_steps
from clusterforge.health.state import HEALTH_STRIKES
from clusterforge.journal import Journal
from tests.health.fake_head import Crash, FakeHead

NODES = ["node-001", "node-002", "node-003", "node-004"]
HOUR = 3600.0


class Clock:
    """Real time plus what a test skipped: a finished job's time is its rc file's (real) mtime."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def config(tmp_path: Path, **health: Any) -> LoopConfig:
    policy: dict[str, Any] = {
        "strikes": {"count": 3, "window": "7d"},
        "active": {"profile": "quick", "every": "12h", "max_nodes": 4},
        "remediation": {"recertify_suite": "full", "on_lemon": "flag"},
    }
    policy.update(health)
    return parse_config(
        {
            "stack": "t",
            "health": policy,
            "state_dir": str(tmp_path / "shared"),
            "active_suite": "quick",
            "provider": "local",
            "nodes": {n: {"pool": "gpu", "instance_type": "local", "identities": [f"c-{n}"]} for n in NODES},
        }
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


def round_(cfg: LoopConfig, head: FakeHead, clock: Clock, journal: Journal | None = None):
    return run_round(cfg, head, journal or Journal(cfg.stack, root=cfg.state_dir), now=clock)


def steps(cfg: LoopConfig, node: str) -> list[str]:
    return [e["step"] for e in read_steps(cfg.stack_dir / LOG_FILE) if e.get("node", "") == node]


def test_only_idle_nodes_are_checked_in_the_hidden_partition_without_requeue(
    tmp_path: Path, clock: Clock
) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    head.submit_user_job("node-002")  # busy with a user's job
    head.nodes["node-003"].update(drain=True, reason="bad fan, ticket 42")  # a person's drain
    result = round_(cfg, head, clock)
    assert sorted(result.submitted) == ["node-001", "node-004"]
    for argv in head.submitted():
        assert "--partition=health" in argv and "--no-requeue" in argv and "--exclusive" in argv
        assert any(a.startswith("--wrap=") and "--profile quick" in a for a in argv)
    assert {j.node for j in head.health_jobs()} == {"node-001", "node-004"}
    assert head.nodes["node-003"]["reason"] == "bad fan, ticket 42"  # not the loop's to touch


def test_the_jobs_hold_the_node_lock_the_config_names(tmp_path: Path, clock: Clock) -> None:
    """The role writes its slurm_validators_lock into the config (roles/slurm/tasks/health_loop.yml): the
    jobs hold that lock, the one the node's health check takes, not a default of their own."""
    from dataclasses import replace

    cfg, head = config(tmp_path), FakeHead(NODES)
    assert (
        cfg.validators_lock == "/run/lock/clusterforge-validators.lock"
    )  # absent from the JSON: the default
    cfg = replace(cfg, validators_lock="/var/lock/site.lock")
    round_(cfg, head, clock)
    wraps = [a for argv in head.submitted() for a in argv if a.startswith("--wrap=")]
    assert wraps and all("9>>/var/lock/site.lock" in w for w in wraps), wraps


def test_max_nodes_counts_checks_already_running(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path, active={"profile": "quick", "every": "12h", "max_nodes": 2}), FakeHead(NODES)
    assert len(round_(cfg, head, clock).submitted) == 2
    assert round_(cfg, head, clock).submitted == []  # two still running: no room
    assert len(head.health_jobs()) == 2


def test_a_check_preempted_by_a_user_job_is_retried_not_failed(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(["node-001"] + NODES[1:])
    round_(cfg, head, clock)
    (job,) = head.health_jobs("node-001")
    assert job.state == "RUNNING"
    user = head.submit_user_job("node-001")  # a user's job needs the node: the check is cancelled at once
    assert head.ended[job.id].end == "PREEMPTED" and user.state == "RUNNING"
    result = round_(cfg, head, clock)
    assert result.preempted == ["node-001"] and not result.failed and not result.drained
    assert not Journal(cfg.stack, root=cfg.state_dir).section(HEALTH_STRIKES)
    assert "node-001" not in result.submitted  # busy now: not idle
    head.end_job(user)
    clock.advance(60)
    assert "node-001" in round_(cfg, head, clock).submitted  # retried on the next idle round
    assert steps(cfg, "node-001") == ["submitted", "preempted", "submitted"]


def test_controller_down_pauses_and_drains_nothing(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    round_(cfg, head, clock)
    head.finish("node-001", passed=False, reason="GPU 0 fell off the bus")
    head.controller_up = False
    head.calls.clear()
    result = round_(cfg, head, clock)
    assert result.paused and "not answering" in result.paused
    assert head.calls == [["scontrol", "ping"]]  # asked nothing else, changed nothing
    assert not head.nodes["node-001"]["drain"]
    assert steps(cfg, "")[-1] == "paused"
    head.controller_up = True
    result = round_(cfg, head, clock)
    assert result.failed == {"node-001": "clusterforge: gpu-health: GPU 0 fell off the bus"}
    assert head.nodes["node-001"]["drain"]


def test_controller_lost_mid_round_pauses_without_failing_anyone(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    original = head._sbatch

    def sbatch_then_down(argv: list[str]) -> tuple[int, str, str]:
        head.controller_up = False
        return 1, "", "sbatch: error: Batch job submission failed: Unable to contact slurm controller\n"

    head._sbatch = sbatch_then_down
    result = round_(cfg, head, clock)
    assert result.paused.startswith("the controller stopped answering mid-round")
    assert not result.failed and not any(n["drain"] for n in head.nodes.values())
    head._sbatch, head.controller_up = original, True


def test_fail_drain_recertify_and_return_only_on_a_pass(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    round_(cfg, head, clock)
    reason = "GPU 0 (GPU-11111111-2222-3333-4444-555555555555) fell off the bus"
    head.finish("node-001", passed=False, reason=reason)
    head.submit_user_job("node-001")  # a user's job lands before the loop sees the failure
    r = round_(cfg, head, clock)
    assert r.drained == {"node-001": f"clusterforge: gpu-health: {reason}"}
    assert head.state_of("node-001") == "draining"  # the user's job finishes first
    assert round_(cfg, head, clock).recertifying == []  # still draining: wait
    head.end_job(next(j for j in head.jobs.values() if j.node == "node-001"))
    r = round_(cfg, head, clock)
    assert r.recertifying == ["node-001"]
    (job,) = head.health_jobs("node-001")
    assert job.reservation == "clusterforge_health" and "--profile full" in job.script
    head.submit_user_job("node-001")  # held: no user job lands on it
    assert head.state_of("node-001") == "allocated$" and job.state == "RUNNING"
    head.finish("node-001", passed=False, reason="GPU 0 still missing")
    r = round_(cfg, head, clock)
    assert r.failed and head.nodes["node-001"]["drain"] and not r.returned  # never undrained without a pass
    assert (
        "clusterforge_health" not in head.reservations
        or "node-001" not in head.reservations["clusterforge_health"]
    )
    assert round_(cfg, head, clock).recertifying == []  # a failed re-certification waits recertify_retry (1h)
    clock.advance(HOUR + 1)
    assert round_(cfg, head, clock).recertifying == ["node-001"]
    head.finish("node-001", passed=True)
    r = round_(cfg, head, clock)
    assert r.returned == ["node-001"] and not head.nodes["node-001"]["drain"]
    assert head.state_of("node-001") in ("idle", "allocated")  # back in service, out of the reservation
    strikes = Journal(cfg.stack, root=cfg.state_dir).section(HEALTH_STRIKES)
    assert [s["identity"] for s in strikes] == ["GPU-11111111-2222-3333-4444-555555555555", "c-node-001"]
    assert steps(cfg, "node-001") == [
        "submitted", "failed", "drained", "submitted", "failed", "drained", "submitted", "passed", "returned",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "waits"), [({}, HOUR), ({"pools": {"gpu": {"recertify_retry": "10m"}}}, 600.0)]
)
def test_a_failed_recertification_is_tried_again_after_the_pools_retry(
    tmp_path: Path, clock: Clock, policy: dict[str, Any], waits: float
) -> None:
    cfg, head = config(tmp_path, **policy), FakeHead(NODES)
    round_(cfg, head, clock)
    head.finish("node-001", passed=False, reason="x")
    round_(cfg, head, clock)  # drained
    assert round_(cfg, head, clock).recertifying == ["node-001"]
    head.finish("node-001", passed=False, reason="y")
    round_(cfg, head, clock)  # failed again: waits the pool's retry, not the default's
    clock.advance(waits - 5)
    assert round_(cfg, head, clock).recertifying == []
    clock.advance(10)
    assert round_(cfg, head, clock).recertifying == ["node-001"]


def test_a_recertification_passed_with_a_lesser_suite_does_not_return(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    round_(cfg, head, clock)
    head.finish("node-001", passed=False, reason="x")
    round_(cfg, head, clock)
    j = Journal(cfg.stack, root=cfg.state_dir)
    later = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(clock() + 5))
    j.annotate("node-001", verdict="pass", profile="quick", certified_at=later)
    clock.advance(10)
    r = round_(cfg, head, clock)
    assert not r.returned and r.recertifying == ["node-001"]  # a quick pass is not the policy's full suite
    assert head.health_jobs("node-001")[0].reservation == "clusterforge_health"


@pytest.mark.parametrize(
    ("policy", "hook", "expect"),
    [
        ({"remediation": {"recertify_suite": "full", "on_lemon": "flag"}}, False, "flag"),
        ({"pools": {"gpu": {"recertify_suite": "full", "on_lemon": "replace"}}}, True, "hook"),
        ({"pools": {"gpu": {"recertify_suite": "full", "on_lemon": "replace"}}}, False, "request"),
    ],
)
def test_a_lemon_is_replaced_only_where_the_policy_says(
    tmp_path: Path, clock: Clock, policy: dict[str, Any], hook: bool, expect: str
) -> None:
    cfg = config(tmp_path, strikes={"count": 2, "window": "7d"}, **policy)
    if hook:
        cfg = parse_config({**_raw(cfg), "replace_hook": ["/usr/local/bin/replace-node"]})
    head = FakeHead(NODES)
    hooked: list[list[str]] = []
    base_call = head.__call__

    def call(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        if argv[0] == "/usr/local/bin/replace-node":
            hooked.append(argv)
            return 0, "replacement of node-001 requested\n", ""
        return base_call(argv, stdin)

    round_(cfg, call_head(head, call), clock)
    head.finish("node-001", passed=False, reason="first")
    round_(cfg, call_head(head, call), clock)  # strike 1: drained
    round_(cfg, call_head(head, call), clock)  # re-certification submitted
    head.finish("node-001", passed=False, reason="second")
    r = round_(cfg, call_head(head, call), clock)  # strike 2: a lemon
    r2 = round_(cfg, call_head(head, call), clock)  # asked once, not every round
    j = Journal(cfg.stack, root=cfg.state_dir)
    assert head.nodes["node-001"]["drain"] and not head.health_jobs(
        "node-001"
    )  # kept drained, no more checks
    if expect == "flag":
        assert r.flagged == ["node-001"] and not r.replace_requested and not hooked
        assert j.section(RMA_FLAGGED)["node-001"]["strikes"] == 2 and not j.section(REPLACE_REQUESTED)
    else:
        assert r.replace_requested == ["node-001"] and not r.flagged
        assert j.section(REPLACE_REQUESTED)["node-001"]["identity"] == "c-node-001"
        assert hooked == ([["/usr/local/bin/replace-node", "node-001"]] if hook else [])
    assert not r2.replace_requested and not r2.flagged


def _raw(cfg: LoopConfig) -> dict[str, Any]:
    return {
        "stack": cfg.stack,
        "health": cfg.health.model_dump(),
        "state_dir": str(cfg.state_dir),
        "active_suite": cfg.active_suite,
        "provider": cfg.provider,
        "nodes": {
            n.name: {"pool": n.pool, "instance_type": n.instance_type, "identities": list(n.identities)}
            for n in cfg.nodes.values()
        },
    }


def call_head(head: FakeHead, call: Any) -> Any:
    class Wrapped:
        def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
            return call(argv, stdin)

    return Wrapped()


def test_killed_mid_round_resumes_without_submitting_twice(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    head.crash_after_sbatch = 1  # the second sbatch lands, then the loop dies before journalling it
    with pytest.raises(Crash):
        round_(cfg, head, clock)
    assert len(head.health_jobs()) == 2
    result = round_(cfg, head, clock)  # a new process: the journal read back from disk
    assert result.adopted == ["node-002"] and sorted(result.submitted) == ["node-003", "node-004"]
    per_node = [next(a for a in argv if a.startswith("--nodelist=")) for argv in head.submitted()]
    assert sorted(per_node) == [f"--nodelist={n}" for n in NODES]  # one job per node, ever
    head.finish("node-002", passed=True)
    assert round_(cfg, head, clock).passed == ["node-002"]


def test_a_failure_recorded_before_a_kill_is_one_strike(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    round_(cfg, head, clock)
    head.finish("node-001", passed=False, reason="boom")
    j = Journal(cfg.stack, root=cfg.state_dir)
    original = j.mark_failed

    def die(*a: Any, **k: Any) -> None:
        raise Crash("killed between the strike and the verdict")

    j.mark_failed = die
    with pytest.raises(Crash):
        round_(cfg, head, clock, j)
    j.mark_failed = original
    round_(cfg, head, clock)
    assert len(Journal(cfg.stack, root=cfg.state_dir).section(HEALTH_STRIKES)) == 1
    assert head.nodes["node-001"]["drain"]


@pytest.mark.parametrize(
    ("reason", "check"),
    [
        ("clusterforge: xid: Xid 79 x40 on 0000:44:00 (node fault)", "xid"),
        # the HealthCheckProgram's quick checks drain with their own prefix, named by the check
        ("clusterforge: healthcheck: software-versions: slurmd: not held", "software-versions"),
    ],
)
def test_the_passive_checks_drain_is_one_strike_and_is_recertified(
    tmp_path: Path, clock: Clock, reason: str, check: str
) -> None:
    cfg, head = config(tmp_path, active={"profile": "quick", "every": "12h", "max_nodes": 1}), FakeHead(NODES)
    head.nodes["node-004"].update(drain=True, reason=reason)
    round_(cfg, head, clock)
    round_(cfg, head, clock)
    strikes = Journal(cfg.stack, root=cfg.state_dir).section(HEALTH_STRIKES)
    assert [s["check"] for s in strikes] == [check]
    assert [j.reservation for j in head.health_jobs("node-004")] == ["clusterforge_health"]


def test_the_health_checks_drain_beside_the_loops_own_failure_is_one_strike(
    tmp_path: Path, clock: Clock
) -> None:
    # Real Slurm on the local stack (tests/integration/test_health_loop_stack.py): a lost hold failed the
    # loop's check, and the node's HealthCheckProgram drained it with its own reason before the round
    # that read the result. One fault, one strike; the node is the loop's to re-certify.
    cfg, head = config(tmp_path, active={"profile": "quick", "every": "12h", "max_nodes": 1}), FakeHead(NODES)
    round_(cfg, head, clock)
    head.finish("node-001", passed=False, reason="clusterforge: software-versions: slurmd: not held")
    head.nodes["node-001"].update(
        drain=True, reason="clusterforge: healthcheck: software-versions: slurmd: not held"
    )
    round_(cfg, head, clock)
    round_(cfg, head, clock)
    strikes = Journal(cfg.stack, root=cfg.state_dir).section(HEALTH_STRIKES)
    assert [s["node"] for s in strikes] == ["node-001"], strikes  # the loop's failure; the drain adds none
    assert [j.reservation for j in head.health_jobs("node-001")][-1:] == ["clusterforge_health"]


def test_fleet_judging_fails_the_slow_node_with_the_same_reason(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    round_(cfg, head, clock)
    for node, rate in zip(NODES, (100.0, 101.0, 99.0, 10.0), strict=True):
        head.finish(node, passed=True, rate=rate)
    r = round_(cfg, head, clock)
    assert sorted(r.passed) == NODES[:3]
    assert r.failed["node-004"].startswith("clusterforge: matmul-burnin: 10.0 GFLOP/s")
    assert "fleet median" in r.failed["node-004"]


def test_a_job_that_wrote_no_report_fails_closed(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    round_(cfg, head, clock)
    (job,) = head.health_jobs("node-001")
    folder = head.job_folder(job)
    folder.mkdir(parents=True)
    (folder / "rc").write_text("2\n")  # the validators exited by themselves, and left no report
    head.end_job(job)
    assert "node-001" in round_(cfg, head, clock).failed


def test_a_drain_that_is_not_the_loops_is_never_lifted_or_taken(tmp_path: Path, clock: Clock) -> None:
    cfg, head = config(tmp_path), FakeHead(NODES)
    round_(cfg, head, clock)
    head.finish("node-001", passed=False, reason="x")
    round_(cfg, head, clock)  # drained by the loop
    head.nodes["node-001"]["reason"] = "clusterforge: upgrading"  # a rollout takes the node over
    for _ in range(2):
        r = round_(cfg, head, clock)
        assert not r.recertifying and not r.returned
    assert head.nodes["node-001"] == {"drain": True, "reason": "clusterforge: upgrading", "down": False}
