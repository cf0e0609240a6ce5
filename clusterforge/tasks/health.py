"""health.plan: what the health policy (the spec's ``health`` section) would do now (thin task).

Reads the stack's journal (and with --live Slurm and the head loop's requests); changes nothing. The
loop that acts on these decisions runs on the head node (``clusterforge.health.loop``: docs/health.md);
`invoke replace --requested` does the replaces it asks for.
"""

from __future__ import annotations

import json as jsonlib
import time
from collections import Counter
from pathlib import Path

from invoke import Context, task
from invoke.exceptions import Exit
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from clusterforge.health.live import with_slurm
from clusterforge.health.plan import HealthPlan, health_plan
from clusterforge.health.state import read_inputs
from clusterforge.journal import Journal, stack_dir
from clusterforge.slurm.parse import SinfoNode
from clusterforge.spec.checks import check_file
from clusterforge.spec.loader import stack_path
from clusterforge.spec.models import ClusterSpec
from clusterforge.tasks._cli import friendly


def _slurm_view(spec: ClusterSpec) -> tuple[dict[str, SinfoNode], str]:
    """sinfo through the stack's running head node ({} and why not, when it cannot be asked)."""
    from clusterforge.health.head_state import stack_heads
    from clusterforge.status import slurm_states

    return slurm_states(*stack_heads(spec))


def _checked(spec_file: Path) -> ClusterSpec:
    report = check_file(spec_file)
    if not report.ok or report.spec is None:
        lines = "\n".join(f"  {f.render()}" for f in report.errors)
        raise Exit(f"{spec_file}: the spec is not valid:\n{lines}", code=1)
    return report.spec


def build(spec_file: Path, now: float | None = None, live: bool = False) -> HealthPlan:
    return build_for(_checked(spec_file), now, live)


def build_for(spec: ClusterSpec, now: float | None = None, live: bool = False) -> HealthPlan:
    journal = Journal(spec.stack, stack_dir(spec.stack).parent)
    inputs = read_inputs(spec, journal.nodes, journal.sections)
    when = time.time() if now is None else now
    note = "idle nodes: from the journal only (certified, not being certified); --live asks Slurm"
    if live:
        sinfo, why = _slurm_view(spec)
        if sinfo:
            inputs = with_slurm(inputs, sinfo, when)
            note = "drained and idle states: from Slurm (sinfo) now, with the passive check's drains"
        else:
            note = f"Slurm not asked ({why}): idle nodes from the journal only"
    result = health_plan(spec.health, inputs, when)
    result.notes.append(note)
    return result


def _table(result: HealthPlan) -> Table:
    table = Table(title="health policy: nodes it would act on now")
    for column in ("node", "pool", "action", "strikes", "why"):
        table.add_column(column)
    for d in result.changes():
        verdict = result.lemons.get(d.node)
        strikes = f"{verdict.strikes}{' (lemon)' if verdict.lemon else ''}" if verdict else "0"
        table.add_row(d.node, d.pool, d.action, strikes, escape(d.why))
    return table


@task(
    help={
        "stack": "stack name: stacks/NAME.yaml",
        "spec": "path of a spec file (instead of --stack)",
        "dry_run": "required: show what the policy would do now and change nothing (the only mode built)",
        "json": "print JSON: every node's decision, strikes, mean time between incidents",
        "live": "ask Slurm (through the head node) which nodes are drained and idle now",
    }
)
@friendly
def plan(
    c: Context, stack: str = "", spec: str = "", dry_run: bool = False, json: bool = False, live: bool = False
) -> None:
    """Show what the health policy would do now: per node keep, drain, re-certify, return, replace or
    flag for RMA, with its strikes, and which idle nodes the next active check would take."""
    if bool(stack) == bool(spec):
        raise Exit("give exactly one of --stack NAME or --spec PATH", code=1)
    if not dry_run:
        raise Exit(
            "health.plan acts on nothing yet: run it with --dry-run (docs/health.md says what is built)",
            code=1,
        )
    cluster = _checked(Path(spec) if spec else stack_path(stack))
    result = build_for(cluster, live=live)
    if json:
        print(jsonlib.dumps(result.to_json(), indent=2))
        return
    console = Console()
    counts = Counter(d.action for d in result.decisions)
    console.print(
        "health policy (dry run): "
        + (", ".join(f"{n} {a}" for a, n in sorted(counts.items())) or "no nodes"),
        highlight=False,
    )
    if result.changes():
        console.print(_table(result))
    console.print(f"active check next: {', '.join(result.active) or 'none due'}", highlight=False)
    for note in result.notes:
        console.print(f"note: {note}", style="yellow", highlight=False)
    if live:
        _print_head_requests(console, cluster)


def _print_head_requests(console: Console, cluster: ClusterSpec) -> None:
    """What the loop on the head asks the workstation for, and whether it was done."""
    from clusterforge.health.head_state import open_requests, read_stack_head_state

    state, why = read_stack_head_state(cluster)
    if state is None:
        console.print(f"note: the head's health loop not asked: {why}", style="yellow", highlight=False)
        return
    todo = open_requests(state, Journal(cluster.stack, stack_dir(cluster.stack).parent))
    for r in todo:
        console.print(
            f"the loop asks to replace {r.node} ({r.strikes} strikes on {r.identity}: {escape(r.why)}): "
            f"`invoke replace --stack {cluster.stack} --requested`",
            highlight=False,
        )
    for node, entry in sorted(state.rma_flagged.items()):
        console.print(
            f"the loop flagged {node} for RMA: {escape(str(entry.get('why') or entry))}", highlight=False
        )
    for note in state.notes:
        console.print(f"note: {note}", style="yellow", highlight=False)
