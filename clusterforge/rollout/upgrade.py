"""`invoke upgrade`: the rolling, certification-gated application of a changed spec or roles.

The plan (``clusterforge.plan``: the journal's applied state against the working tree, and the
stack as it is now) says which nodes change; the batch planner (``plan.rollout``) cuts them into
batches under the spec's ``rollout`` policy; the executor runs them with the cluster's steps.
A finished batch is journalled (section ``rollout``, keyed by the target's digest), and each
upgraded node's converge record and certified version set with it, so a rollout cut short
resumes where it stopped and `status` shows the mixed versions in between.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from clusterforge.cluster_secrets import SecretError, before_converge
from clusterforge.journal import Journal, stack_dir
from clusterforge.pipeline.context import StackPaths
from clusterforge.pipeline.up import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_PREFLIGHT, Seams, preflight
from clusterforge.plan.applied import record_converged
from clusterforge.plan.impact import LiveState, NodeImpact, plan_impacts
from clusterforge.plan.inputs import StackInputs, digest
from clusterforge.plan.live import live_state
from clusterforge.plan.rollout import RolloutPlan, RolloutRecord, plan_rollout
from clusterforge.plan.sources import PlanError, base_from_journal, new_side
from clusterforge.providers import Provider, get_provider
from clusterforge.rollout.cluster_steps import ClusterSteps, StepError
from clusterforge.rollout.executor import RolloutResult, UpgradeSteps, execute
from clusterforge.rollout.identity import fresh_journal, identity
from clusterforge.slurm.admission import AdmissionError
from clusterforge.spec.loader import REPO_ROOT
from clusterforge.spec.models import ClusterSpec

SECTION = "rollout"


@dataclass
class UpgradeOutcome:
    code: int
    plan: RolloutPlan | None = None
    result: RolloutResult | None = None
    notes: list[str] = field(default_factory=list)


def rollout_id(new: StackInputs) -> str:
    """The target's digest (every node's new inputs): the same change resumes the same rollout,
    however many nodes it has done; another change starts anew."""
    return digest({n: new.nodes[n].to_dict() for n in sorted(new.nodes)})


def _refusals(impacts: list[NodeImpact], stack: str) -> list[str]:
    """Changes an upgrade does not make: machines come and go with `up` / `replace`."""
    lines = []
    for i in impacts:
        if i.provision in ("create", "destroy"):
            lines.append(
                f"{i.node}: {i.provision} — run `invoke up --stack {stack}` for nodes that come or go"
            )
        elif i.provision == "replace":
            lines.append(
                f"{i.node}: its machine is replaced — run `invoke replace --stack {stack} --node {i.node}`"
            )
    return lines


def print_plan(rp: RolloutPlan, impacts: list[NodeImpact], console: Console) -> None:
    why = {i.node: "; ".join(i.reasons) for i in impacts}
    table = Table(title="rollout (batch by batch: drain, converge, reboot, re-certify, resume)")
    for col in ("batch", "pool", "nodes", "reboot", "why"):
        table.add_column(col)
    if rp.converge_only:
        table.add_row("0", "(in place)", ", ".join(rp.converge_only), "-", "configure only: no drain")
    for b in rp.batches:
        reasons = sorted({why.get(n, "") for n in b.nodes} - {""})
        label = b.pool if b.in_service else f"{b.pool} (no drain)"
        table.add_row(
            str(b.index), label, ", ".join(b.nodes), ", ".join(b.reboot) or "-", escape("; ".join(reasons))
        )
    console.print(table)
    if rp.finished:
        console.print(f"already upgraded by this rollout: {', '.join(rp.finished)}", highlight=False)
    for blocked in rp.blocked:
        console.print(f"blocked: pool {blocked.pool}: {blocked.reason}", style="yellow", highlight=False)


def summary(result: RolloutResult, rp: RolloutPlan, console: Console) -> None:
    table = Table(title="upgrade: summary")
    for col in ("node", "result", "detail"):
        table.add_column(col)
    for name in result.converged:
        table.add_row(name, "[green]converged[/green]", "configure only, in place")
    for name in result.upgraded:
        table.add_row(name, "[green]upgraded[/green]", "converged, re-certified, serving")
    for name, reason in sorted(result.failed.items()):
        table.add_row(name, "[red]failed[/red]", escape(f"drained: {reason}"))
    for name, why in sorted(result.skipped.items()):
        table.add_row(name, "[yellow]not upgraded[/yellow]", escape(why))
    for name in result.not_started:
        table.add_row(
            name, "[yellow]not upgraded[/yellow]", "rollout stopped before its batch: serving, old version"
        )
    for blocked in rp.blocked:
        for name in blocked.nodes:
            table.add_row(name, "[yellow]not upgraded[/yellow]", escape(blocked.reason))
    console.print(table)
    if result.stopped:
        console.print(f"rollout stopped: {result.stopped}", style="red", highlight=False)


def upgrade(
    spec: ClusterSpec,
    *,
    dry_run: bool = False,
    console: Console | None = None,
    seams: Seams | None = None,
    root: Path = REPO_ROOT,
    steps_factory: Callable[[ClusterSpec, Provider, Seams, Console], UpgradeSteps] | None = None,
    confirm: Callable[[], None] = lambda: None,
    base: StackInputs | None = None,
) -> UpgradeOutcome:
    """``confirm`` runs after the batches are printed, before anything changes (it raises to stop).
    ``base``: what the nodes run now, when not the journal's applied record (`--base GIT_REF` on a
    CI runner that has no journal)."""
    console = console or Console()
    seams = seams or Seams()
    provider = seams.provider or get_provider(spec)
    if not preflight(spec, provider, console, seams.playbooks):
        return UpgradeOutcome(EXIT_PREFLIGHT)
    journal = Journal(spec.stack, stack_dir(spec.stack).parent)
    try:
        base = base or base_from_journal(journal)
    except PlanError as exc:
        console.print(f"error: {exc}", style="red", highlight=False)
        return UpgradeOutcome(EXIT_PREFLIGHT)
    new = new_side(spec, root)
    live: LiveState = live_state(spec, provider, seams.runner)
    for line in live.notes:
        console.print(f"note: {line}", style="yellow", highlight=False)
    impacts = plan_impacts(base, new, live)
    refused = _refusals(impacts, spec.stack)
    if refused:
        console.print("error: `invoke upgrade` changes nodes in place; not these:", style="red")
        for line in refused:
            console.print(f"  {line}", highlight=False)
        return UpgradeOutcome(EXIT_PREFLIGHT)
    rid = rollout_id(new)
    stored = journal.section(SECTION) or {}
    record = RolloutRecord.from_dict(stored) if stored.get("rollout_id") == rid else RolloutRecord(rid)
    rp = plan_rollout(
        impacts, live, spec.rollout, finished=record.finished, pool_order=[p.name for p in spec.node_pools]
    )
    if not rp.batches and not rp.converge_only:
        for blocked in rp.blocked:
            console.print(f"blocked: pool {blocked.pool}: {blocked.reason}", style="yellow", highlight=False)
        if rp.blocked:
            return UpgradeOutcome(EXIT_FAILED, rp)
        console.print(f"stack {spec.stack!r}: nothing to upgrade (the nodes run what the spec says)")
        return UpgradeOutcome(EXIT_OK, rp)
    print_plan(rp, impacts, console)
    if dry_run:
        return UpgradeOutcome(EXIT_OK, rp)
    confirm()
    if stored.get("rollout_id") == rid and record.finished:
        console.print(
            f"resuming rollout {rid[:12]}: {len(record.finished)} node(s) done earlier", highlight=False
        )
    # The cluster's munge key before any node is drained: a runner without the stack's state (CI)
    # takes it from the stack's key store; a local key that is not the cluster's stops here.
    try:
        key_note = before_converge(
            StackPaths.for_stack(spec.stack, seams.inventories).munge_key, seams.key_store(spec)
        )
    except SecretError as exc:
        console.print(f"error: nothing drained: {exc}", style="red", highlight=False)
        return UpgradeOutcome(EXIT_PREFLIGHT, rp)
    if key_note:
        console.print(key_note, highlight=False)
    steps = (steps_factory or ClusterSteps)(spec, provider, seams, console)

    def upgraded(names: list[str]) -> None:
        # What the plan compares with next time, and the version set each node now runs certified.
        now = fresh_journal(spec.stack)
        record_converged(now, spec, names, root)
        for name in names:
            if name in new.nodes and new.nodes[name].role == "gpu":
                now.record_certified(name, new.nodes[name].pinned, identity(now, name))

    def save(rec: RolloutRecord) -> None:
        fresh_journal(spec.stack).set_section(SECTION, rec.to_dict())

    def note(line: str) -> None:
        console.print(line, style="bold", highlight=False)

    try:
        result = execute(rp, steps, spec.rollout, record, save=save, on_upgraded=upgraded, note=note)
    except KeyboardInterrupt:
        record.stopped = "interrupted"
        save(record)
        console.print(
            "interrupted: finished batches are journalled; run the same command to resume", style="yellow"
        )
        return UpgradeOutcome(EXIT_INTERRUPTED, rp)
    except (StepError, AdmissionError) as exc:
        record.stopped = f"a step could not run: {exc}"
        save(record)
        console.print(f"error: rollout stopped, {exc}", style="red", highlight=False)
        return UpgradeOutcome(EXIT_FAILED, rp)
    summary(result, rp, console)
    bad = result.failed or result.stopped or result.skipped or rp.blocked
    return UpgradeOutcome(EXIT_FAILED if bad else EXIT_OK, rp, result)
