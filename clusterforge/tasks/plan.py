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
from clusterforge.plan.inputs import StackInputs
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
    fallback_base: str = "",
) -> Plan:
    """Read both sides, ask the live stack, diff. Raises PlanError / Exit for a side that cannot be read."""
    cluster = _load_new(spec_path)
    root = repo_root_for(spec_path)
    new = new_side(cluster, root)
    notes: list[str] = []

    def from_ref(ref: str, flag: str) -> StackInputs:
        rel = str(spec_path.resolve().relative_to(root)) if spec_path.resolve().is_relative_to(root) else ""
        if not rel:
            raise PlanError(f"{flag} {ref}: {spec_path} is not inside the git work tree {root}")
        inputs, more = base_from_ref(root, ref, rel)
        notes.extend(more)
        return inputs

    old = from_ref(base, "--base") if base else _applied(cluster, fallback_base, from_ref, notes)
    notes += image_notes(cluster, root)
    state = LiveState()
    if live:
        state = live_state(cluster, provider or get_provider(cluster), runner, previewer)
        notes += state.notes
    notes += floor_notes(cluster)
    return Plan(
        cluster.stack, old.label, new.label, plan_impacts(old, new, state), tuple(notes), data=state.data
    )


def _applied(
    cluster: ClusterSpec, fallback: str, from_ref: Callable[[str, str], StackInputs], notes: list[str]
) -> StackInputs:
    """What the last `up`/`upgrade` applied, from the stack's journal where its state lives (a
    shared backend is read, not locked); with ``fallback``, a git revision when none is recorded."""
    from clusterforge.state import StateError, reading
    from clusterforge.state.config import backend_for

    try:
        with reading(cluster):
            journal = Journal(cluster.stack, stack_dir(cluster.stack).parent)
            try:
                return base_from_journal(journal)
            except PlanError as exc:
                backend = backend_for(cluster)
                where = backend.where(f"{cluster.stack}/state.json") if backend else str(journal.path)
                if not fallback:
                    raise PlanError(str(exc).replace(str(journal.path), where)) from None
                notes.append(f"{where}: no applied state recorded yet: compared with {fallback} instead")
    except StateError as exc:
        raise PlanError(str(exc)) from None
    return from_ref(fallback, "--fallback-base")


def image_notes(cluster: ClusterSpec, root: Path) -> list[str]:
    """One note per pool whose baked image does not fit the spec (`invoke image.bake`), or why
    that could not be told; nothing for pools on the base image."""
    from clusterforge.images.boot import baked_pools, stale_images, stale_notes
    from clusterforge.images.record import load_records

    if not baked_pools(cluster):
        return []
    try:
        records = load_records(cluster.stack)
        return stale_notes(cluster, stale_images(cluster, records, root), records)
    except Exception as exc:  # noqa: BLE001 - a plan never fails on this: it says what it could not tell
        return [f"baked images not checked ({type(exc).__name__}: {exc})"]


@task(
    help={
        "stack": "stack name: stacks/NAME.yaml",
        "spec": "path of a spec file (instead of --stack)",
        "base": "git revision to compare with (default: the last applied state in the stack's journal, "
        "read from the spec's state backend)",
        "fallback_base": "git revision to compare with when the state records no applied state yet (CI)",
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
    fallback_base: str = "",
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
        result = build_plan(_spec_file(stack, spec), base, fallback_base=fallback_base)
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
        console.print(table(result) if result.changed else result.headline(), highlight=False)
        for line in result.data:
            console.print(f"DATA: {line}", style="bold red", highlight=False)
        for note in result.notes:
            console.print(f"note: {note}", style="yellow", highlight=False)
    if result.pending:
        raise Exit(code=EXIT_PENDING)
