"""Admission logic against a fake head node that answers like Slurm 22.05 does (formats as captured
in tests/data/slurm/), including its refusal to RESUME a node that is not drained."""

from __future__ import annotations

import pytest

from clusterforge.slurm.admission import (
    HOLD_REASON,
    Admission,
    AdmissionError,
    ControllerError,
    failure_reason,
)
from tests.pipeline.fakes import FakeSlurm


def test_hold_puts_nodes_in_reservation_and_resumes_them_inside_it() -> None:
    slurm = FakeSlurm(nodes={"node-001": ("drained", HOLD_REASON), "node-002": ("idle", "")})
    adm = Admission(slurm)
    adm.hold(["node-001", "node-002"])
    states = adm.nodes()
    assert slurm.reservation == ["node-001", "node-002"]
    assert not states["node-001"].drained and states["node-001"].in_maintenance
    assert not any(s.serving for s in states.values())  # held: no user job can land
    # the reservation exists before the drained node is resumed, so it is never open to users
    create = next(i for i, c in enumerate(slurm.calls) if c[:3] == ["scontrol", "create", "reservation"])
    resume = next(i for i, c in enumerate(slurm.calls) if "State=RESUME" in c)
    assert create < resume


def test_release_makes_node_serving_and_ends_empty_reservation() -> None:
    slurm = FakeSlurm(nodes={"node-001": ("idle", ""), "node-002": ("idle", "")})
    adm = Admission(slurm)
    adm.hold(["node-001", "node-002"])
    adm.release("node-001")
    assert slurm.reservation == ["node-002"] and adm.nodes()["node-001"].serving
    adm.release("node-002")
    assert slurm.reservation is None and adm.nodes()["node-002"].serving


def test_fail_drains_with_check_reason_and_leaves_hold() -> None:
    slurm = FakeSlurm(nodes={"node-001": ("idle", ""), "node-002": ("idle", "")})
    adm = Admission(slurm)
    adm.hold(["node-001", "node-002"])
    reason = adm.fail("node-002", "preflight-versions", "nccl 2.18.1 installed, 2.26.2 pinned\nmore")
    node = adm.nodes()["node-002"]
    assert (
        node.drained
        and node.reason
        == reason
        == "clusterforge: preflight-versions: nccl 2.18.1 installed, 2.26.2 pinned more"
    )
    assert slurm.reservation == ["node-001"]


def test_recertifying_a_failed_node_resumes_it_inside_the_hold() -> None:
    slurm = FakeSlurm(nodes={"node-001": ("drained", "clusterforge: burnin: 3 GFLOP/s < 10")})
    adm = Admission(slurm)
    adm.hold(["node-001"])
    assert not adm.nodes()["node-001"].drained and slurm.reservation == ["node-001"]


def test_a_persons_drain_is_left_alone() -> None:
    slurm = FakeSlurm(nodes={"node-001": ("drained", "bad fan, ticket 42")})
    adm = Admission(slurm)
    adm.hold(["node-001"])
    adm.release("node-001")
    assert adm.nodes()["node-001"].drained and adm.nodes()["node-001"].reason == "bad fan, ticket 42"


def test_unknown_node_is_a_clear_error() -> None:
    adm = Admission(FakeSlurm(nodes={"node-001": ("idle", "")}))
    with pytest.raises(AdmissionError, match="node-404: not known to Slurm"):
        adm.hold(["node-404"])


def test_failing_command_names_itself() -> None:
    adm = Admission(lambda argv: (1, "", "slurm_load_node error: Unable to contact slurm controller\n"))
    with pytest.raises(AdmissionError, match="Unable to contact slurm controller"):
        adm.nodes()


def test_failure_reason_is_one_bounded_line() -> None:
    assert failure_reason("nccl", "") == "clusterforge: nccl"
    long = failure_reason("nccl", "x " * 500)
    assert len(long) <= 200 and "\n" not in long and long.startswith("clusterforge: nccl: x x")


def test_wait_registered_reports_missing() -> None:
    adm = Admission(FakeSlurm(nodes={"node-001": ("idle", "")}))
    assert adm.wait_registered(["node-001"], timeout_s=0) == []
    assert adm.wait_registered(["node-001", "node-002"], timeout_s=0, poll_s=0) == ["node-002"]


# -- batched: a few head commands per step for any node count (issue 24) ------------------------


def many(count: int, state: str = "drained", reason: str = HOLD_REASON) -> FakeSlurm:
    return FakeSlurm(nodes={f"gpu-{i:04d}": (state, reason) for i in range(1, count + 1)})


@pytest.mark.parametrize("count", [3, 300])
def test_hold_release_and_fail_cost_the_same_commands_at_any_size(count: int) -> None:
    slurm = many(count)
    adm = Admission(slurm)
    names = sorted(slurm.nodes)
    adm.hold(names)
    assert len(slurm.calls) == 4  # sinfo, show reservation, create, one RESUME of every node
    assert slurm.reservation == names and not any(s.drained for s in adm.nodes().values())
    resume = next(c for c in slurm.calls if "State=RESUME" in c)
    assert resume[2] == f"NodeName=gpu-[0001-{count:04d}]"  # one host list, never a name per command
    before = len(slurm.calls)
    failed = {names[0]: "clusterforge: gpu-health: Xid 79", names[-1]: "clusterforge: gpu-health: Xid 79"}
    outcome = adm.fail_many(failed)
    assert outcome.drained == failed and not outcome.refused
    adm.release(names[1:-1])
    assert len(slurm.calls) - before <= 8
    assert slurm.reservation is None
    assert {n: s["state"] for n, s in slurm.nodes.items() if s["state"] == "drained"} == dict.fromkeys(
        failed, "drained"
    )


def test_drains_with_different_reasons_go_in_one_command_on_stdin() -> None:
    slurm = many(4, "idle", "")
    adm = Admission(slurm)
    reasons = {
        "gpu-0001": "clusterforge: a: one",
        "gpu-0002": "clusterforge: b: two",
        "gpu-0003": "clusterforge: a: one",
    }
    outcome = adm.fail_many(reasons)
    scripts = [c for c in slurm.calls if c[:2] == ["sh", "-c"]]
    assert len(scripts) == 1 and outcome.drained == reasons
    assert {n: slurm.nodes[n]["reason"] for n in reasons} == reasons
    assert slurm.nodes["gpu-0004"]["state"] == "idle"


def test_a_drain_the_controller_refuses_is_reported_and_the_node_stays_held() -> None:
    slurm = many(3, "idle", "")
    slurm.refuse_drain = {"gpu-0002"}
    adm = Admission(slurm)
    adm.hold(sorted(slurm.nodes))
    outcome = adm.fail_many(
        {"gpu-0002": "clusterforge: x: y", "gpu-0003": "clusterforge: x: y", "gpu-0404": "clusterforge: x: z"}
    )
    assert (
        "refused" in outcome.refused["gpu-0002"] and "Access/permission denied" in outcome.refused["gpu-0002"]
    )
    assert "not known to the Slurm controller" in outcome.refused["gpu-0404"]
    assert slurm.reservation == ["gpu-0001", "gpu-0002"]  # refused: still held, never open to users


def test_a_failure_while_no_controller_answers_is_a_controller_error_naming_it() -> None:
    slurm = many(2)
    slurm.controller_down = True
    adm = Admission(slurm)
    with pytest.raises(ControllerError, match=r"Slurmctld\(primary\) at head-001 is DOWN"):
        adm.nodes()
    with pytest.raises(ControllerError):
        adm.fail_many({"gpu-0001": "clusterforge: x: y"})
    with pytest.raises(ControllerError):
        adm.wait_registered(["gpu-0001"], timeout_s=0)
    assert slurm.nodes["gpu-0001"]["reason"] == HOLD_REASON  # nothing changed, nothing failed


def test_a_refused_update_with_the_controller_up_is_an_admission_error() -> None:
    slurm = many(1, "idle", "")
    with pytest.raises(AdmissionError, match="Invalid node name") as err:
        Admission(slurm).drain(["gpu-0404"], "clusterforge: upgrading")
    assert not isinstance(err.value, ControllerError)
