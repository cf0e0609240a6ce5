"""Admission logic against a fake head node that answers like Slurm 22.05 does (formats as captured
in tests/data/slurm/), including its refusal to RESUME a node that is not drained."""

from __future__ import annotations

import pytest

from clusterforge.slurm.admission import HOLD_REASON, Admission, AdmissionError, failure_reason
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
