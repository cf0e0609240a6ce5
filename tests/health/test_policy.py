"""The health loop's pure decisions: strikes and lemons, remediation, the active-check scheduler."""

from __future__ import annotations

import pytest

from clusterforge.health.remediation import NodeHealth, decide
from clusterforge.health.scheduler import Candidate, choose
from clusterforge.health.strikes import Strike, dedupe, lemon_verdicts, mean_time_between
from clusterforge.spec.health import ActiveChecks, Remediation, Strikes, duration_seconds

DAY = 86400.0
NOW = 1_800_000_000.0


def strike(identity: str, days_ago: float, node: str = "gpu-001") -> Strike:
    return Strike(identity, node, NOW - days_ago * DAY, f"clusterforge: xid: Xid 79 ({days_ago} d ago)")


@pytest.mark.parametrize(("text", "seconds"), [("7d", 604800), ("12h", 43200), ("90m", 5400), ("30s", 30)])
def test_durations(text: str, seconds: int) -> None:
    assert duration_seconds(text) == seconds


def test_bad_duration_names_the_form() -> None:
    with pytest.raises(ValueError, match="whole number and a unit s, m, h or d"):
        duration_seconds("1w")


def test_three_strikes_in_the_window_make_a_lemon_two_do_not() -> None:
    policy = Strikes(count=3, window="7d")
    ids = {"gpu-001": ["i-0aaa", "GPU-1"], "gpu-002": ["i-0bbb", "GPU-2"]}
    strikes = [strike("i-0aaa", 1), strike("i-0aaa", 3), strike("i-0aaa", 6.9), strike("GPU-2", 1, "gpu-002")]
    strikes += [strike("GPU-2", 2, "gpu-002"), strike("GPU-2", 8, "gpu-002")]  # 8 d ago: outside the window
    verdicts = lemon_verdicts(ids, strikes, policy, NOW)
    assert (
        verdicts["gpu-001"].lemon
        and verdicts["gpu-001"].strikes == 3
        and verdicts["gpu-001"].identity == "i-0aaa"
    )
    assert not verdicts["gpu-002"].lemon and verdicts["gpu-002"].strikes == 2


def test_strikes_stay_with_the_hardware_not_the_node_name() -> None:
    policy = Strikes(count=2, window="7d")
    old_machine = [strike("i-0old", 1), strike("i-0old", 2)]
    replaced = lemon_verdicts({"gpu-001": ["i-0new", "GPU-9"]}, old_machine, policy, NOW)
    assert not replaced["gpu-001"].lemon  # the new machine starts clean
    bad_gpu = [strike("GPU-9", 1, "gpu-007"), strike("GPU-9", 2, "gpu-007")]
    handed_back = lemon_verdicts({"gpu-001": ["i-0new", "GPU-9"]}, bad_gpu, policy, NOW)
    assert handed_back["gpu-001"].lemon  # the bad GPU brings its strikes along


def test_the_same_failure_read_twice_counts_once() -> None:
    one = strike("i-0aaa", 1)
    assert dedupe([one, one, strike("i-0aaa", 2)]) == [one, strike("i-0aaa", 2)]


def test_mean_time_between_incidents() -> None:
    assert mean_time_between([strike("x", 1), strike("x", 3), strike("x", 5)]) == 2 * DAY
    assert mean_time_between([strike("x", 1)]) is None


FAILED = NodeHealth(
    "gpu-001", "gpu", drained=False, last_fail_at=NOW - 60, last_fail_reason="clusterforge: xid: Xid 79"
)


def test_a_failed_node_in_service_is_drained_first() -> None:
    assert decide(FAILED, Remediation(), lemon=False, strikes=1).action == "drain"


def test_a_drained_failed_node_is_recertified_with_the_full_suite() -> None:
    drained = NodeHealth("gpu-001", "gpu", drained=True, last_fail_at=NOW - 60, last_fail_reason="x")
    decision = decide(drained, Remediation(), lemon=False, strikes=1)
    assert decision.action == "recertify" and "(full)" in decision.why


@pytest.mark.parametrize(
    ("pass_at", "suite", "action"),
    [
        (NOW - 10, "full", "return"),  # passed the full suite after the failure
        (NOW - 10, "quick", "recertify"),  # a quick pass is not enough to return
        (NOW - 120, "full", "recertify"),  # the pass is older than the failure
    ],
)
def test_never_returned_without_a_pass_of_the_policy_suite_after_the_failure(
    pass_at: float, suite: str, action: str
) -> None:
    node = NodeHealth(
        "gpu-001", "gpu", drained=True, last_fail_at=NOW - 60, last_pass_at=pass_at, last_pass_suite=suite
    )
    assert decide(node, Remediation(recertify_suite="full"), lemon=False, strikes=1).action == action


def test_a_lemon_is_flagged_unless_the_policy_says_replace() -> None:
    healthy_now = NodeHealth(
        "gpu-001", "gpu", drained=True, last_fail_at=NOW - 60, last_pass_at=NOW, last_pass_suite="full"
    )
    assert decide(healthy_now, Remediation(), lemon=True, strikes=3).action == "flag-rma"
    assert decide(healthy_now, Remediation(on_lemon="replace"), lemon=True, strikes=3).action == "replace"
    static = NodeHealth("gpu-001", "gpu", drained=True, replaceable=False)
    flagged = decide(static, Remediation(on_lemon="replace"), lemon=True, strikes=3)
    assert flagged.action == "flag-rma" and "cannot replace" in flagged.why


def test_a_healthy_node_is_kept_and_a_held_one_waits() -> None:
    healthy = NodeHealth("gpu-001", "gpu", drained=False, last_pass_at=NOW, last_pass_suite="standard")
    assert decide(healthy, Remediation(), lemon=False, strikes=0).action == "keep"
    held = NodeHealth("gpu-001", "gpu", drained=True)
    assert decide(held, Remediation(), lemon=False, strikes=0).action == "wait"


def test_the_scheduler_takes_idle_due_nodes_oldest_first_up_to_the_limit() -> None:
    policy = ActiveChecks(profile="quick", every="12h", max_nodes=2)
    nodes = [
        Candidate("a", idle=True, last_checked=NOW - 13 * 3600),
        Candidate("b", idle=True, last_checked=None),  # never checked: oldest
        Candidate("c", idle=False, last_checked=None),  # busy: a user job wins
        Candidate("d", idle=True, last_checked=NOW - 3600),  # not due
        Candidate("e", idle=True, last_checked=NOW - 20 * 3600),
    ]
    assert choose(nodes, policy, NOW) == ["b", "e"]


def test_checks_already_running_count_against_the_limit() -> None:
    policy = ActiveChecks(profile="quick", every="12h", max_nodes="50%")
    nodes = [Candidate("a", idle=False, last_checked=None, checking=True)] + [
        Candidate(n, idle=True, last_checked=None) for n in "bcd"
    ]
    assert choose(nodes, policy, NOW) == ["b"]  # 50 % of 4 is 2, one is running
    assert choose(nodes, ActiveChecks(profile=None), NOW) == []


@pytest.mark.parametrize("bad", [0, "0%", "101%", "ten", True])
def test_max_nodes_must_be_a_count_or_a_percentage(bad: object) -> None:
    with pytest.raises(ValueError, match="max_nodes"):
        ActiveChecks(max_nodes=bad)  # type: ignore[arg-type]
