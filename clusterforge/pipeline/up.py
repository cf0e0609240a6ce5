"""`up` and on-demand `certify`: preflight, plan, the streamed pipeline, the summary."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from clusterforge.cluster_secrets import KeyStore, key_store
from clusterforge.journal import Journal
from clusterforge.node.remote import Runner, node_runner
from clusterforge.pipeline.certify_stage import CertifyStage, drain_earlier_failures
from clusterforge.pipeline.context import INVENTORIES, PLAYBOOKS, Options, StackContext, StackPaths
from clusterforge.pipeline.display import Board
from clusterforge.pipeline.health_baselines import publish_baselines
from clusterforge.pipeline.scheduler import BaseStage, NodeProgress, Scheduler, StageResult, Status
from clusterforge.pipeline.stages import ConfigureStage, ProvisionStage
from clusterforge.providers import Provider, get_provider
from clusterforge.slurm.parse import compress_hostlist
from clusterforge.spec.models import ClusterSpec

EXIT_OK, EXIT_FAILED, EXIT_PREFLIGHT, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass
class Outcome:
    code: int
    progress: dict[str, NodeProgress] = field(default_factory=dict)
    changed: int = 0

    @property
    def failed(self) -> list[str]:
        return sorted(n for n, p in self.progress.items() if p.status is not Status.DONE)


def preflight(spec: ClusterSpec, provider: Provider, console: Console, playbooks: Path = PLAYBOOKS) -> bool:
    """Everything that would stop `up`, found before anything is created."""
    problems = provider.preflight(spec)
    for p in problems:
        console.print(p.render(), style="red" if p.level == "error" else "yellow", highlight=False)
    missing = [p.name for p in (playbooks / "site.yml", playbooks / "certify.yml") if not p.exists()]
    if missing:
        console.print(f"error: {', '.join(missing)} missing in {playbooks}", style="red")
    return not missing and not any(p.level == "error" for p in problems)


def checks_for(suite: str) -> list[str]:
    """Check ids the validators run for a profile (asked from the validators CLI itself)."""
    proc = subprocess.run(
        [sys.executable, "-m", "validators", "list", "--json", "--profile", suite],
        capture_output=True, text=True, check=False, cwd=PLAYBOOKS.parent,
    )  # fmt: skip
    try:
        return [c["id"] for c in json.loads(proc.stdout)]
    except (json.JSONDecodeError, TypeError, KeyError):
        return [f"(cannot list: {proc.stderr.strip() or 'validators list failed'})"]


def print_plan(
    spec: ClusterSpec, provider: Provider, journal: Journal, options: Options, console: Console
) -> None:
    planned = provider.plan(spec)
    table = Table(title=f"plan for stack {spec.stack!r} (nothing is changed)")
    for col in ("nodes", "count", "role", "type", "provider", "configure", "certify"):
        table.add_column(col)
    # Nodes with the same plan share a row, named by their Slurm host list: a line per kind of
    # change, not per node, at any cluster size.
    groups: dict[tuple[str, ...], list[str]] = {}
    for p in planned:
        if p.role != "gpu":
            cert = "-"
        elif options.recertify or not journal.is_done(p.name, "certified"):
            cert = "certify, then admit or drain"
        else:
            cert = "certified earlier: skip"
        groups.setdefault((p.role, p.instance_type, p.action, "site.yml (converge)", cert), []).append(p.name)
    for key, names in groups.items():
        table.add_row(compress_hostlist(names), str(len(names)), *key)
    console.print(table)
    suites = sorted(
        {
            spec.certification.profiles[pool.certification].suite
            for pool in spec.node_pools
            if pool.certification
        }
    )
    for suite in suites:
        console.print(f"checks ({suite}): {', '.join(checks_for(suite))}", highlight=False)
    console.print(
        "playbooks: playbooks/site.yml (head first, then compute nodes), playbooks/certify.yml",
        highlight=False,
    )


def summary(outcome: Outcome, ctx: StackContext, console: Console) -> None:
    if not ctx.board.detailed:
        # Thousands of nodes: the counts per stage and pool and the nodes that failed, never a
        # row per node (`invoke status --wide` / `--json` and the reports have every node).
        console.print(f"stack {ctx.spec.stack}: summary", highlight=False)
        console.print(ctx.board.view())
        _trailer(outcome, ctx, console)
        return
    table = Table(title=f"stack {ctx.spec.stack}: summary")
    for col in ("node", "role", "result", "changed", "detail"):
        table.add_column(col)
    for name, p in sorted(outcome.progress.items()):
        role = ctx.nodes[name].role if name in ctx.nodes else ""
        if p.status is Status.DONE:
            rec = ctx.journal.record(name)
            result = "[green]certified[/green]" if rec.verdict == "pass" else "[green]ok[/green]"
        else:
            result = f"[red]{p.status.value} at {p.stage}[/red]"
        detail = p.reason
        if p.status is Status.DONE and "configure" in p.notes:
            detail = f"{p.notes['configure']}; {p.reason}"
        table.add_row(name, role, result, str(p.changed), escape(detail))
    console.print(table)
    _trailer(outcome, ctx, console)


def _trailer(outcome: Outcome, ctx: StackContext, console: Console) -> None:
    html = ctx.paths.reports / "report.html"
    reports = f"{html}" if html.exists() else f"{ctx.paths.reports}"
    console.print(
        f"Ansible changes: {outcome.changed}; logs: {ctx.paths.run}; reports: {reports}", highlight=False
    )


def run_stages(ctx: StackContext, stages: list[BaseStage], names: list[str], console: Console) -> Outcome:
    """Run ``stages`` over the nodes ``names`` (up, certify, a rollout's replace), then summarise."""
    try:
        with ctx.board:
            progress = Scheduler(stages, names, listener=ctx.board.stage).run()
    except KeyboardInterrupt:
        console.print(
            "interrupted: finished work is journalled; run the same command again to resume", style="yellow"
        )
        return Outcome(EXIT_INTERRUPTED)
    outcome = Outcome(EXIT_OK, progress, sum(p.changed for p in progress.values()))
    _drain_earlier_failures(ctx, progress, console)
    published = publish_baselines(ctx, progress)  # only where the spec runs the health loop
    if published is not None:
        console.print(published.line, style=None if published.ok else "yellow", highlight=False)
    summary(outcome, ctx, console)
    if outcome.failed:
        outcome.code = EXIT_FAILED
    return outcome


def _drain_earlier_failures(ctx: StackContext, progress: dict[str, NodeProgress], console: Console) -> None:
    """Every failed compute node ends drained with why (the certify stage drains its own): a node that
    failed to provision or converge is out of service with its reason in Slurm, not an idle node."""
    heads = [h.name for h in ctx.heads()]
    if not heads or any(progress[h].status is not Status.DONE for h in heads if h in progress):
        return  # no controller to tell (the compute nodes' results already say the head failed)
    failed = {
        name: (p.stage, p.reason)
        for name, p in progress.items()
        if p.status is Status.FAILED
        and p.stage != CertifyStage.name
        and name in ctx.nodes
        and ctx.nodes[name].role == "gpu"
    }
    for name, why in drain_earlier_failures(ctx, failed).items():
        console.print(
            f"{name}: not drained in Slurm: {why}; the next run drains it", style="yellow", highlight=False
        )


@dataclass
class Seams:
    """What tests replace: the provider, the playbooks folder, the transport to nodes, inventories."""

    provider: Provider | None = None
    playbooks: Path = PLAYBOOKS
    runner: Callable[..., Runner] = node_runner
    inventories: Path = INVENTORIES
    # Where the cluster's munge key lives beside the workstation (clusterforge.cluster_secrets).
    key_store: Callable[[ClusterSpec], KeyStore | None] = key_store


def stack_context(
    spec: ClusterSpec, provider: Provider, options: Options, board: Board, seams: Seams
) -> StackContext:
    """What every stage of one command shares: the spec, provider, journal, paths and board."""
    paths = StackPaths.for_stack(spec.stack, seams.inventories)
    journal = Journal(spec.stack, paths.state.parent)
    return StackContext(
        spec,
        provider,
        journal,
        paths,
        board,
        options,
        playbooks=seams.playbooks,
        runner=seams.runner,
        key_store=seams.key_store,
    )


def up(
    spec: ClusterSpec,
    options: Options,
    *,
    dry_run: bool = False,
    console: Console | None = None,
    seams: Seams | None = None,
) -> Outcome:
    console = console or Console()
    seams = seams or Seams()
    provider = seams.provider or get_provider(spec)
    if not preflight(spec, provider, console, seams.playbooks):
        return Outcome(EXIT_PREFLIGHT)
    if dry_run:
        paths = StackPaths.for_stack(spec.stack, seams.inventories)
        print_plan(spec, provider, Journal(spec.stack, paths.state.parent), options, console)
        return Outcome(EXIT_OK)
    planned = provider.plan(spec)
    board = Board([(p.name, p.pool) for p in planned], console)
    ctx = stack_context(spec, provider, options, board, seams)
    stages: list[BaseStage] = [ProvisionStage(ctx), ConfigureStage(ctx), CertifyStage(ctx)]
    return run_stages(ctx, stages, [p.name for p in planned], console)


class RefreshStage(BaseStage):
    """`certify` on demand: take the nodes as they are now (nothing is created)."""

    name = "refresh"

    def __init__(self, ctx: StackContext):
        self.ctx = ctx

    def _render_inventory(self) -> None:
        """The inventory `up` would render, from the nodes as they are (and the state's munge key)."""
        from clusterforge.inventory import render_inventory, write_inventory

        stack_outputs = getattr(self.ctx.provider, "stack_outputs", None)
        outputs = stack_outputs(self.ctx.spec) if callable(stack_outputs) else None
        inv = render_inventory(
            self.ctx.spec, list(self.ctx.nodes.values()), self.ctx.paths.munge_key, outputs=outputs
        )
        write_inventory(inv, self.ctx.paths.inventory)

    def run(self, nodes: list[str]) -> dict[str, StageResult]:
        with self.ctx.lock:
            self.ctx.nodes = {n.name: n for n in self.ctx.provider.nodes(self.ctx.spec)}
        if not self.ctx.hosts_file.exists():  # a runner that never ran `up` (a fresh CI checkout)
            self._render_inventory()
        out = {}
        for name in nodes:
            node = self.ctx.nodes.get(name)
            if node is None or node.state != "running":
                state = node.state if node else "absent"
                out[name] = StageResult(False, f"node is {state}: run `invoke up` first")
            elif not self.ctx.journal.is_done(name, "configured"):
                out[name] = StageResult(False, "never configured: run `invoke up` first")
            else:
                out[name] = StageResult(True)
        return out


def certify(
    spec: ClusterSpec,
    names: list[str] | None,
    profile: str | None,
    console: Console | None = None,
    seams: Seams | None = None,
) -> Outcome:
    console = console or Console()
    seams = seams or Seams()
    provider = seams.provider or get_provider(spec)
    planned = provider.plan(spec)
    compute = [p.name for p in planned if p.role == "gpu"]
    unknown = sorted(set(names or []) - set(compute))
    if unknown:
        console.print(f"error: not compute nodes of stack {spec.stack!r}: {', '.join(unknown)} "
                      f"(compute nodes: {', '.join(compute)})", style="red")  # fmt: skip
        return Outcome(EXIT_PREFLIGHT)
    targets = sorted(names) if names else compute
    heads = [p.name for p in planned if p.role == "head"]
    pools = {p.name: p.pool for p in planned}
    board = Board([(n, pools[n]) for n in targets], console)
    options = Options(recertify=True, profile=profile, only=frozenset(targets))
    ctx = stack_context(spec, provider, options, board, seams)
    # Heads pass through refresh too (admission needs the head's connection), not through certify.
    return run_stages(ctx, [RefreshStage(ctx), CertifyStage(ctx)], heads + targets, console)
