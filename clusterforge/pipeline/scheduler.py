"""Streaming per-node scheduler: each node walks the stages on its own.

A node enters the next stage as soon as it leaves the previous one: it does not wait for the
slowest node of its stage. Each stage has one worker; when the worker is free it takes every
node that is waiting for it (and whose gate is open) as one batch, because one Ansible run over
several hosts costs far less than several runs of one host each. A node that fails a stage is
quarantined with the reason and goes no further; the other nodes go on.

Ctrl-C (or any exception in the caller's thread) sets the cancel flag: no new batch starts,
running stages are asked to stop (``Stage.cancel``), the workers are joined, and the
KeyboardInterrupt propagates. Progress is journalled by the stages as each node finishes, so
a re-run resumes where this one stopped.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Protocol


class Status(StrEnum):
    WAITING = "waiting"  # queued for a stage
    RUNNING = "running"
    DONE = "done"  # passed every stage
    FAILED = "failed"  # quarantined
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class StageResult:
    ok: bool
    reason: str = ""  # one line, why it failed (or a note when ok)
    changed: int = 0


class Gate(Enum):
    OPEN = "open"
    WAIT = "wait"
    BLOCKED = "blocked"  # can never open (a node it depends on failed)


class Stage(Protocol):
    name: str

    def gate(self, node: str, progress: dict[str, NodeProgress]) -> tuple[Gate, str]:
        """May ``node`` enter this stage now? (BLOCKED carries the reason.)"""
        ...

    def run(self, nodes: list[str]) -> dict[str, StageResult]:
        """Run the stage over a batch; a result for every node (a missing one counts as failed)."""
        ...

    def cancel(self) -> None:
        """Ask a running ``run`` to stop soon (called from another thread)."""
        ...


@dataclass
class NodeProgress:
    name: str
    stage: str = ""  # stage it is in, or the last one it was in
    status: Status = Status.WAITING
    reason: str = ""
    changed: int = 0
    passed: list[str] = field(default_factory=list)  # stages passed
    notes: dict[str, str] = field(default_factory=dict)  # stage -> what it said when it passed

    def passed_stage(self, stage: str) -> bool:
        return stage in self.passed


Listener = Callable[[NodeProgress], None]


class BaseStage:
    """Convenience base: gate always open, cancel is a no-op."""

    name = "stage"

    def gate(self, node: str, progress: dict[str, NodeProgress]) -> tuple[Gate, str]:
        return Gate.OPEN, ""

    def run(self, nodes: list[str]) -> dict[str, StageResult]:  # pragma: no cover - abstract
        raise NotImplementedError

    def cancel(self) -> None:
        return None


class Scheduler:
    def __init__(self, stages: Sequence[Stage], nodes: Sequence[str], listener: Listener | None = None):
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        self.stages = list(stages)
        self.progress = {n: NodeProgress(n, stage=self.stages[0].name) for n in nodes}
        self._listener = listener or (lambda _p: None)
        self._cond = threading.Condition()
        self._cancelled = False
        self._busy: set[str] = set()  # stages with a batch running

    # -- state, all under self._cond --------------------------------------------------------

    def _stage_index(self, name: str) -> int:
        return next(i for i, s in enumerate(self.stages) if s.name == name)

    def _finished(self) -> bool:
        return all(p.status in (Status.DONE, Status.FAILED, Status.CANCELLED) for p in self.progress.values())

    def _take_batch(self, stage: Stage) -> list[str]:
        batch = []
        for p in self.progress.values():
            if p.status is not Status.WAITING or p.stage != stage.name:
                continue
            gate, reason = stage.gate(p.name, self.progress)
            if gate is Gate.OPEN:
                batch.append(p.name)
            elif gate is Gate.BLOCKED:
                self._set(p, Status.FAILED, reason or f"cannot enter {stage.name}")
        return batch

    def _set(self, p: NodeProgress, status: Status, reason: str = "") -> None:
        p.status = status
        p.reason = reason
        self._cond.notify_all()
        try:
            self._listener(p)
        except Exception:  # noqa: BLE001 - a broken progress display must not stop the pipeline
            traceback.print_exc()

    # -- workers ----------------------------------------------------------------------------

    def _worker(self, stage: Stage) -> None:
        while True:
            with self._cond:
                while True:
                    if self._cancelled or self._finished():
                        return
                    batch = self._take_batch(stage)
                    if batch:
                        break
                    self._cond.wait(timeout=1.0)
                self._busy.add(stage.name)
                for name in batch:
                    self._set(self.progress[name], Status.RUNNING)
            try:
                results = stage.run(batch)
            except Exception as exc:  # noqa: BLE001 - one stage's crash fails its batch, not the pipeline
                traceback.print_exc()
                results = {n: StageResult(False, f"{stage.name} crashed: {exc}") for n in batch}
            with self._cond:
                self._busy.discard(stage.name)
                for name in batch:
                    self._advance(stage, self.progress[name], results.get(name))

    def _advance(self, stage: Stage, p: NodeProgress, result: StageResult | None) -> None:
        if self._cancelled and (result is None or not result.ok):
            self._set(p, Status.CANCELLED, "interrupted")
            return
        if result is None:
            self._set(p, Status.FAILED, f"{stage.name}: no result for this node")
            return
        p.changed += result.changed
        if not result.ok:
            self._set(p, Status.FAILED, result.reason or f"{stage.name} failed")
            return
        p.passed.append(stage.name)
        if result.reason:
            p.notes[stage.name] = result.reason
        nxt = self._stage_index(stage.name) + 1
        if nxt == len(self.stages):
            self._set(p, Status.DONE, result.reason)
        else:
            p.stage = self.stages[nxt].name
            self._set(p, Status.WAITING)

    def run(self) -> dict[str, NodeProgress]:
        """Run every node through every stage; returns the final progress per node."""
        threads = [
            threading.Thread(target=self._worker, args=(s,), name=f"stage-{s.name}", daemon=True)
            for s in self.stages
        ]
        for t in threads:
            t.start()
        try:
            with self._cond:
                while not self._finished():
                    self._cond.wait(timeout=0.5)
        except BaseException:
            self.cancel()
            for t in threads:
                t.join()
            raise
        for t in threads:
            t.join()
        return self.progress

    def cancel(self) -> None:
        with self._cond:
            self._cancelled = True
            busy = [s for s in self.stages if s.name in self._busy]
            self._cond.notify_all()
        for stage in busy:
            stage.cancel()
        with self._cond:
            for p in self.progress.values():
                if p.status is Status.WAITING:
                    self._set(p, Status.CANCELLED, "interrupted")
