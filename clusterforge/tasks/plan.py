"""plan: what a change of spec, roles, playbooks or catalogues does to each node (thin task)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from invoke import Context, task
from invoke.exceptions import Exit
from rich.console import Console

from clusterforge.journal import Journal, stack_dir
from clusterforge.node.remote import Runner, node_runner
from clusterforge.plan.floors import floor_notes
from clusterforge.plan.impact import LiveState, plan_impacts
from clusterforge.plan.live import Previewer, live_state, pulumi_previewer
from clusterforge.plan.render import Plan, json_text, markdown, table
from clusterforge.plan.sources import PlanError, base_from_journal, base_from_ref, new_side, repo_root_for
from clusterforge.providers import Provider, get_provider
from clusterforge.spec.checks import check_file
from clusterforge.spec.loader import SpecError, stack_path
from clusterforge.spec.models import ClusterSpec
from clusterforge.tasks._cli import friendly

# terraform plan -detailed-exitcode: 0 no changes, 1 error, 2 changes pending
# (developer.hashicorp.com/terraform/cli/commands/plan).
EXIT_NO_CHANGES, EXIT_ERROR, EXIT_PENDING = 0, 1, 2
FORMATS = ("table", "markdown", "json")


def _spec_file(stack: str, spec: str) -> Path:
    if bool(stack) == bool(spec):
        raise Exit("give exactly one of --stack NAME or --spec PATH", code=EXIT_ERROR)
    return Path(spec) if spec else stack_path(stack)


def _load_new(path: Path) -> ClusterSpec:
    report = check_file(path)
    if not report.ok or report.spec is None:
        lines = "\n".join(f"  {f.render()}" for f in report.errors)
        raise Exit(f"working tree: the spec is not valid, so there is no plan:\n{lines}", code=EXIT_ERROR)
    return report.spec


def build_plan(
    spec_path: Path,
    base: str = "",
    provider: Provider | None = None,
    runner: Callable[..., Runner] = node_runner,
    previewer: Previewer = pulumi_previewer,
    live: bool = True,
) -> Plan:
    """Read both sides, ask the live stack, diff. Raises PlanError / Exit for a side that cannot be read."""
    cluster = _load_new(spec_path)
    root = repo_root_for(spec_path)
    new = new_side(cluster, root)
    notes: list[str] = []
    if base:
        rel = str(spec_path.resolve().relative_to(root)) if spec_path.resolve().is_relative_to(root) else ""
        if not rel:
            raise PlanError(f"--base {base}: {spec_path} is not inside the git work tree {root}")
        old, more = base_from_ref(root, base, rel)
        notes += more
    else:
        old = base_from_journal(Journal(cluster.stack, stack_dir(cluster.stack).parent))
    state = LiveState()
    if live:
        state = live_state(cluster, provider or get_provider(cluster), runner, previewer)
        notes += state.notes
    notes += floor_notes(cluster)
    return Plan(cluster.stack, old.label, new.label, plan_impacts(old, new, state), tuple(notes))


@task(
    help={
        "stack": "stack name: stacks/NAME.yaml",
        "spec": "path of a spec file (instead of --stack)",
        "base": "git revision to compare with (default: the last applied state in the stack's journal)",
        "json": "print JSON (same as --format json)",
        "format": "table (people), markdown (a pull-request comment or job summary) or json",
    }
)
@friendly
def plan(
    c: Context,
    stack: str = "",
    spec: str = "",
    base: str = "",
    json: bool = False,
    format: str = "table",  # noqa: A002 - the option is --format
) -> None:
    """Say what the working tree's spec, roles, playbooks and catalogues would do to each node.

    Per node: provision (create / replace / destroy / keep), configure (roles whose inputs change),
    reboot, re-certify, and drain (nodes in service, with their running jobs). Changes nothing.
    Exit 0: no changes; 2: changes pending; 1: error (like `terraform plan -detailed-exitcode`).
    """
    fmt = "json" if json else format
    if fmt not in FORMATS:
        raise Exit(f"--format {format!r}: use one of {', '.join(FORMATS)}", code=EXIT_ERROR)
    try:
        result = build_plan(_spec_file(stack, spec), base)
    except PlanError as exc:
        raise Exit(str(exc), code=EXIT_ERROR) from None
    except SpecError as exc:
        raise Exit("\n".join(f.render() for f in exc.findings), code=EXIT_ERROR) from None
    if fmt == "json":
        print(json_text(result))
    elif fmt == "markdown":
        print(markdown(result))
    else:
        console = Console()
        console.print(table(result) if result.pending else result.headline(), highlight=False)
        for note in result.notes:
            console.print(f"note: {note}", style="yellow", highlight=False)
    if result.pending:
        raise Exit(code=EXIT_PENDING)
