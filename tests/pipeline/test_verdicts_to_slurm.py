"""Every failed verdict reaches Slurm; a controller fault is never a node's (issue 26), over the
pipeline's fakes: the fake head refuses drains and loses its controller as told."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from clusterforge.journal import Journal
from clusterforge.pipeline import certify_stage
from clusterforge.pipeline.up import certify
from tests.pipeline.fakes import FakeSlurm
from tests.pipeline.test_up import run_up

# Each runs the stand-in playbooks through ansible-runner, as test_up.py does: a real tool chain.
pytestmark = pytest.mark.slow

COMPUTE = ("node-001", "node-002", "node-003")


def test_a_node_that_never_registers_ends_drained_with_the_reason(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(certify_stage, "REGISTER_TIMEOUT_S", 0.0)
    slurm: FakeSlurm = world["slurm"]
    original = slurm._answer

    def answer(argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        rc, out, err = original(argv, stdin)
        if argv[0] == "sinfo":  # its slurmd cannot reach the controller: in slurm.conf, never answering
            out = out.replace("node-002 drained ", "node-002 drained* ")
        return rc, out, err

    slurm._answer = answer  # type: ignore[method-assign]
    outcome, text = run_up(world)
    assert outcome.failed == ["node-002"], text
    assert slurm.nodes["node-002"] == {
        "state": "drained",
        "reason": "clusterforge: slurm-registration: slurmd never registered with the controller",
    }
    assert all(slurm.nodes[n]["state"] == "idle" for n in ("node-001", "node-003"))
    assert slurm.reservation is None


def test_a_drain_the_controller_refuses_is_said_and_the_next_run_drains_it(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CF_TEST_FAIL_CERT", "node-003")
    slurm: FakeSlurm = world["slurm"]
    slurm.refuse_drain = {"node-003"}
    outcome, text = run_up(world)
    assert outcome.failed == ["node-003"]
    reason = outcome.progress["node-003"].reason
    assert reason.startswith("clusterforge: software-versions: nccl: 2.18.1 installed"), reason
    assert "not drained: the Slurm controller refused" in reason and "the next run drains it" in reason
    assert slurm.reservation == ["node-003"]  # still held: no user work lands on it meanwhile
    assert Journal(world["spec"].stack).section("pending_drains") == {
        "node-003": reason.split(" (not drained")[0]
    }
    slurm.refuse_drain = set()
    again = certify(
        world["spec"], ["node-001"], None, console=Console(file=io.StringIO()), seams=world["seams"]
    )
    assert again.code == 0
    assert slurm.nodes["node-003"] == {"state": "drained", "reason": reason.split(" (not drained")[0]}
    assert not Journal(world["spec"].stack).section("pending_drains")


def stop_controller_at_the_probe(slurm: FakeSlurm, back_after_pings: int | None = None) -> None:
    """slurmctld stops when the network step starts; it returns after that many `scontrol ping`s."""
    original = slurm._answer
    pings, stopped = [0], []

    def answer(argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        if argv[:2] == ["sh", "-c"] and "srun" in argv[2] and not stopped:
            slurm.controller_down = True
            stopped.append(True)
        if argv == ["scontrol", "ping"] and slurm.controller_down:
            pings[0] += 1
            if back_after_pings is not None and pings[0] > back_after_pings:
                slurm.controller_down = False
        return original(argv, stdin)

    slurm._answer = answer  # type: ignore[method-assign]


def test_a_controller_that_stays_away_fails_no_node_and_the_next_run_carries_on(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(certify_stage.CONTROLLER_WAIT_ENV, "0")
    slurm: FakeSlurm = world["slurm"]
    stop_controller_at_the_probe(slurm)
    outcome, text = run_up(world)
    assert outcome.code == 1 and outcome.failed == list(COMPUTE)
    for node in COMPUTE:
        why = outcome.progress[node].reason
        assert "the Slurm controller is not answering (Slurmctld(primary) at head-001 is DOWN)" in why, why
        assert "stays held and the next run certifies it again" in why
        assert slurm.nodes[node]["state"] == "idle"  # resumed inside the hold: never drained for it
    assert slurm.reservation == list(COMPUTE)
    journal = Journal(world["spec"].stack)
    assert all(journal.record(n).verdict == "" and journal.record(n).certifying for n in COMPUTE)
    slurm.controller_down = False
    again, text = run_up(world)
    assert again.code == 0, text
    assert all(slurm.nodes[n]["state"] == "idle" for n in COMPUTE) and slurm.reservation is None


def test_a_controller_back_within_the_wait_is_waited_for(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(certify_stage, "CONTROLLER_POLL_S", 0.0)
    slurm: FakeSlurm = world["slurm"]
    stop_controller_at_the_probe(slurm, back_after_pings=3)
    outcome, text = run_up(world)
    assert outcome.code == 0, text
    assert "waiting for the Slurm controller" in text
    assert all(slurm.nodes[n]["state"] == "idle" for n in COMPUTE) and slurm.reservation is None
