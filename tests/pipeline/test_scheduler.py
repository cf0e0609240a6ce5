"""Scheduler: streaming (a fast node does not wait for a slow one), quarantine, gates, Ctrl-C."""

from __future__ import annotations

import threading

import pytest

from clusterforge.pipeline.scheduler import BaseStage, Gate, NodeProgress, Scheduler, StageResult, Status


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str]] = []  # (stage, node) in the order batches started

    def add(self, stage: str, nodes: list[str]) -> None:
        with self.lock:
            self.events.extend((stage, n) for n in nodes)


class FakeStage(BaseStage):
    def __init__(
        self,
        name: str,
        rec: Recorder,
        fail: dict[str, str] | None = None,
        hold: dict[str, threading.Event] | None = None,
    ) -> None:
        self.name = name
        self.rec = rec
        self.fail = fail or {}
        self.hold = hold or {}
        self.batches: list[list[str]] = []

    def run(self, nodes: list[str]) -> dict[str, StageResult]:
        self.batches.append(list(nodes))
        self.rec.add(self.name, nodes)
        for n in nodes:
            if n in self.hold:
                assert self.hold[n].wait(10), "test stage held too long"
        return {n: StageResult(n not in self.fail, self.fail.get(n, ""), changed=1) for n in nodes}


def test_all_nodes_pass_every_stage() -> None:
    rec = Recorder()
    stages = [FakeStage(s, rec) for s in ("provision", "configure", "certify")]
    progress = Scheduler(stages, ["a", "b", "c"]).run()
    assert {p.status for p in progress.values()} == {Status.DONE}
    assert all(p.passed == ["provision", "configure", "certify"] for p in progress.values())
    assert all(p.changed == 3 for p in progress.values())


def test_streaming_next_stage_starts_before_previous_stage_finishes_all_nodes() -> None:
    rec = Recorder()
    fast_certified = threading.Event()

    class Provision(FakeStage):
        def run(self, nodes: list[str]) -> dict[str, StageResult]:
            if "slow" in nodes:
                # The slow node's provisioning only ends once the fast one is certified.
                assert fast_certified.wait(10), "fast node was not streamed through"
            return super().run(nodes)

    class Certify(FakeStage):
        def run(self, nodes: list[str]) -> dict[str, StageResult]:
            if "fast" in nodes:
                fast_certified.set()
            return super().run(nodes)

    provision = Provision("provision", rec)
    # gate: provision one node at a time, "fast" first
    order = ["fast", "slow"]

    def gate(node: str, progress: dict[str, NodeProgress]) -> tuple[Gate, str]:
        first_waiting = next(
            n for n in order if progress[n].stage == "provision" and progress[n].status is Status.WAITING
        )
        busy = any(p.stage == "provision" and p.status is Status.RUNNING for p in progress.values())
        return (Gate.OPEN, "") if node == first_waiting and not busy else (Gate.WAIT, "")

    provision.gate = gate  # type: ignore[method-assign]
    progress = Scheduler([provision, FakeStage("configure", rec), Certify("certify", rec)], order).run()
    assert progress["fast"].status is Status.DONE and progress["slow"].status is Status.DONE
    assert rec.events.index(("certify", "fast")) < rec.events.index(("provision", "slow"))


def test_failure_quarantines_only_that_node() -> None:
    rec = Recorder()
    configure = FakeStage("configure", rec, fail={"b": "TASK [slurm : start slurmd] on b: failed"})
    certify = FakeStage("certify", rec)
    progress = Scheduler([FakeStage("provision", rec), configure, certify], ["a", "b", "c"]).run()
    assert progress["b"].status is Status.FAILED
    assert "slurm" in progress["b"].reason and progress["b"].stage == "configure"
    assert progress["a"].status is Status.DONE and progress["c"].status is Status.DONE
    assert ("certify", "b") not in rec.events  # never certified


def test_crashing_stage_fails_its_batch_not_the_pipeline() -> None:
    rec = Recorder()

    class Crash(FakeStage):
        def run(self, nodes: list[str]) -> dict[str, StageResult]:
            raise RuntimeError("podman exploded")

    progress = Scheduler([Crash("provision", rec)], ["a"]).run()
    assert progress["a"].status is Status.FAILED and "podman exploded" in progress["a"].reason


def test_missing_result_counts_as_failure() -> None:
    class Partial(BaseStage):
        name = "configure"

        def run(self, nodes: list[str]) -> dict[str, StageResult]:
            return {nodes[0]: StageResult(True)} if "a" in nodes else {}

    progress = Scheduler([Partial()], ["a", "b"]).run()
    statuses = {n: p.status for n, p in progress.items()}
    assert Status.FAILED in statuses.values()


def test_blocked_gate_quarantines_dependants() -> None:
    rec = Recorder()

    class NeedsHead(FakeStage):
        def gate(self, node: str, progress: dict[str, NodeProgress]) -> tuple[Gate, str]:
            head = progress["head"]
            if node == "head" or head.passed_stage(self.name):
                return Gate.OPEN, ""
            if head.status is Status.FAILED:
                return Gate.BLOCKED, "head node head failed: no controller to join"
            return Gate.WAIT, ""

    configure = NeedsHead("configure", rec, fail={"head": "munge failed"})
    progress = Scheduler([FakeStage("provision", rec), configure], ["head", "n1"]).run()
    assert progress["head"].status is Status.FAILED
    assert progress["n1"].status is Status.FAILED and "no controller" in progress["n1"].reason
    assert ("configure", "n1") not in rec.events


def test_waiting_nodes_batch_together() -> None:
    rec = Recorder()
    configure = FakeStage("configure", rec)
    Scheduler([FakeStage("provision", rec), configure], ["a", "b", "c", "d"]).run()
    # provision hands all four over at once, so configure runs them as one batch (one Ansible run)
    assert configure.batches == [["a", "b", "c", "d"]]


def test_interrupt_cancels_waiting_nodes_and_running_stages() -> None:
    rec = Recorder()
    started = threading.Event()
    cancelled = threading.Event()

    class Slow(BaseStage):
        name = "configure"

        def run(self, nodes: list[str]) -> dict[str, StageResult]:
            started.set()
            cancelled.wait(10)
            return {n: StageResult(False, "cancelled") for n in nodes}

        def cancel(self) -> None:
            cancelled.set()

    seen: list[tuple[str, Status]] = []
    sched = Scheduler(
        [FakeStage("provision", rec), Slow(), FakeStage("certify", rec)],
        ["a", "b"],
        listener=lambda p: seen.append((p.name, p.status)),
    )

    def interrupt() -> None:
        started.wait(10)
        raise_in_main.set()

    raise_in_main = threading.Event()
    threading.Thread(target=interrupt, daemon=True).start()

    original_wait = sched._cond.wait

    def wait(timeout: float | None = None) -> bool:
        if raise_in_main.is_set() and threading.current_thread() is threading.main_thread():
            raise KeyboardInterrupt
        return original_wait(timeout=0.05)

    sched._cond.wait = wait  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        sched.run()
    assert cancelled.is_set()
    assert {p.status for p in sched.progress.values()} == {Status.CANCELLED}
    assert ("certify", "a") not in rec.events
