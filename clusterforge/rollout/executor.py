"""The rollout loop: batch by batch, drain -> converge -> (reboot) -> re-certify -> resume.

Decides nothing about batches (``clusterforge.plan.rollout`` does) and touches no cluster (the
steps do): it applies the spec's ``rollout`` policy to what the steps report, journals every
finished batch through ``save`` so an interrupted rollout resumes where it stopped, and says
what was and was not upgraded.

- A node that fails a step stays drained with ``clusterforge: <step>: <one line>`` (a failed
  re-certification keeps the check's own reason); ``on_failure: stop`` ends the rollout after
  that batch, ``continue`` goes on. Nodes of later batches are never touched.
- Jobs still running at ``drain_timeout_s``: ``stop`` and ``skip`` resume the node untouched
  (``stop`` then ends the rollout after the batch); ``requeue`` requeues its jobs and upgrades it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from clusterforge.plan.rollout import UPGRADING_REASON, Batch, RolloutPlan, RolloutRecord, RolloutSteps
from clusterforge.slurm.admission import failure_reason
from clusterforge.spec.models import Rollout

STEP_NAMES = ("converge", "reboot", "recertify")


class UpgradeSteps(RolloutSteps, Protocol):
    """``RolloutSteps`` plus what the drain-timeout and failure policies need."""

    def requeue(self, nodes: Sequence[str], timeout_s: int) -> dict[str, str]:
        """Requeue the jobs still running on ``nodes``; returns the nodes still busy after."""
        ...

    def fail(self, node: str, reason: str) -> None:
        """Leave ``node`` drained with ``reason``."""
        ...


@dataclass
class BatchOutcome:
    batch: Batch
    upgraded: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # node -> the drain reason it was left with
    skipped: dict[str, str] = field(default_factory=dict)  # node -> why it was resumed untouched


@dataclass
class RolloutResult:
    record: RolloutRecord
    batches: list[BatchOutcome] = field(default_factory=list)
    converged: list[str] = field(default_factory=list)  # configure-only nodes converged in place
    not_started: list[str] = field(default_factory=list)  # nodes of batches after a stop
    stopped: str = ""

    @property
    def failed(self) -> dict[str, str]:
        return {n: r for b in self.batches for n, r in b.failed.items()}

    @property
    def upgraded(self) -> list[str]:
        return [n for b in self.batches for n in b.upgraded]

    @property
    def skipped(self) -> dict[str, str]:
        return {n: r for b in self.batches for n, r in b.skipped.items()}


def _reason(step: str, line: str) -> str:
    # A re-certification failure already is the check's drain reason; keep it as it is.
    return line if line.startswith("clusterforge:") else failure_reason(step, line)


def _drain(
    batch: Batch, steps: UpgradeSteps, policy: Rollout, out: BatchOutcome, note: Callable[[str], None]
) -> tuple[list[str], str]:
    """Drain the batch; returns the nodes to upgrade and why the rollout must stop ("" if not)."""
    nodes = list(batch.nodes)
    if not batch.in_service:
        return nodes, ""
    note(f"batch {batch.index}: draining {', '.join(nodes)} ({UPGRADING_REASON})")
    busy = steps.drain(nodes, UPGRADING_REASON, policy.drain_timeout_s)
    if busy and policy.on_drain_timeout == "requeue":
        note(f"batch {batch.index}: requeueing the jobs on {', '.join(sorted(busy))}")
        busy = steps.requeue(sorted(busy), policy.drain_timeout_s)
    if not busy:
        return nodes, ""
    resumed = steps.resume(sorted(busy))
    for name, why in busy.items():
        out.skipped[name] = f"{why}; resumed untouched (on_drain_timeout: {policy.on_drain_timeout})"
        if name in resumed:
            out.skipped[name] += f"; resuming failed: {resumed[name]}"
    stop = ""
    if policy.on_drain_timeout != "skip":
        stop = f"batch {batch.index}: drain timed out on {', '.join(sorted(busy))}"
    return [n for n in nodes if n not in busy], stop


def _run_batch(
    batch: Batch, steps: UpgradeSteps, policy: Rollout, note: Callable[[str], None]
) -> tuple[BatchOutcome, str]:
    out = BatchOutcome(batch)
    nodes, stop = _drain(batch, steps, policy, out, note)
    for step in STEP_NAMES:
        targets = [n for n in nodes if step != "reboot" or n in batch.reboot]
        if not targets:
            continue
        note(f"batch {batch.index}: {step} {', '.join(targets)}")
        failures = getattr(steps, step)(targets)
        for name, line in sorted(failures.items()):
            reason = _reason(step, line)
            steps.fail(name, reason)
            out.failed[name] = reason
        nodes = [n for n in nodes if n not in failures]
    if nodes:
        resumed = steps.resume(nodes)
        for name, line in sorted(resumed.items()):
            out.failed[name] = _reason("resume", line)
        nodes = [n for n in nodes if n not in resumed]
    out.upgraded = nodes
    if out.failed and policy.on_failure == "stop" and not stop:
        stop = f"batch {batch.index}: {', '.join(sorted(out.failed))} failed"
    return out, stop


def execute(
    plan: RolloutPlan,
    steps: UpgradeSteps,
    policy: Rollout,
    record: RolloutRecord,
    *,
    save: Callable[[RolloutRecord], None],
    on_upgraded: Callable[[list[str]], None],
    note: Callable[[str], None] = lambda line: None,
) -> RolloutResult:
    """Run the plan's batches in order; journal (``save``) after each; stop per policy."""
    result = RolloutResult(record)
    record.stopped = ""
    if plan.converge_only:
        names = list(plan.converge_only)
        note(f"converging in place (no drain): {', '.join(names)}")
        failures = steps.converge(names)
        result.converged = [n for n in names if n not in failures]
        on_upgraded(result.converged)
        if failures:
            out = BatchOutcome(Batch(0, "(in place)", tuple(names)))
            out.failed = {n: _reason("converge", line) for n, line in sorted(failures.items())}
            for name, reason in out.failed.items():
                steps.fail(name, reason)
            result.batches.append(out)
            record.failed.update(out.failed)
            if policy.on_failure == "stop":
                result.stopped = f"converging {', '.join(sorted(failures))} in place failed"
    for batch in plan.batches:
        if result.stopped:
            result.not_started += list(batch.nodes)
            continue
        out, stop = _run_batch(batch, steps, policy, note)
        result.batches.append(out)
        record.finish(batch, out.failed)
        # A node that was skipped is not finished: a later run of this rollout tries it again.
        record.finished = [n for n in record.finished if n not in out.skipped]
        for name in out.upgraded:
            record.failed.pop(name, None)
        on_upgraded(out.upgraded)
        result.stopped = stop
        record.stopped = stop
        save(record)
    record.stopped = result.stopped
    save(record)
    return result
