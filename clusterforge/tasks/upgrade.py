"""upgrade, replace: change a running stack node by node (thin: parse, call clusterforge.rollout, print)."""

from __future__ import annotations

import sys
from pathlib import Path

from invoke import Context, task
from invoke.exceptions import Exit

from clusterforge.plan.inputs import StackInputs
from clusterforge.spec.models import ClusterSpec
from clusterforge.tasks._cli import friendly, locked, state_read
from clusterforge.tasks.cluster import _HELP_SPEC, _HELP_STACK, _HELP_WAIT, load


def _ask(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise Exit(f"refusing to go on without a terminal to confirm ({question}): add --yes", code=2)
    if input(f"{question} [y/N] ").strip().lower() not in ("y", "yes"):
        raise Exit("not confirmed: nothing changed", code=1)


def _base(stack: str, spec: str, ref: str) -> StackInputs:
    """The nodes' current inputs as they are at git revision ``ref`` (as `invoke plan --base`)."""
    from clusterforge.plan.sources import PlanError, base_from_ref, repo_root_for
    from clusterforge.spec.loader import stack_path

    path = (Path(spec) if spec else stack_path(stack)).resolve()
    root = repo_root_for(path)
    if not path.is_relative_to(root):
        raise Exit(f"--base {ref}: {path} is not inside the git work tree {root}", code=2)
    try:
        inputs, notes = base_from_ref(root, ref, str(path.relative_to(root)))
    except PlanError as exc:
        raise Exit(str(exc), code=2) from None
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return inputs


def _applied_recorded(stack: str) -> bool:
    """Whether the journal (as read under the lock) records what a converge applied."""
    from clusterforge.journal import Journal, stack_dir
    from clusterforge.plan.sources import PlanError, base_from_journal

    try:
        base_from_journal(Journal(stack, stack_dir(stack).parent))
    except PlanError:
        return False
    return True


@task(
    help={
        "stack": _HELP_STACK,
        "spec": _HELP_SPEC,
        "dry_run": "print the batches and change nothing",
        "base": "git revision the nodes run now (default: the journal's applied record, read from the spec's "
        "state backend)",
        "fallback_base": "git revision the nodes run when the state records no applied state yet (CI)",
        "wait": _HELP_WAIT,
        "yes": "do not ask before the first batch (needed when there is no terminal)",
    }
)
@friendly
def upgrade(
    c: Context,
    stack: str = "",
    spec: str = "",
    dry_run: bool = False,
    wait: bool = False,
    yes: bool = False,
    base: str = "",
    fallback_base: str = "",
) -> None:
    """Apply a changed spec or roles to a running stack, batch by batch, gated on re-certification.

    Per batch (the spec's `rollout` block): drain (`clusterforge: upgrading`; running jobs finish),
    converge, check rebooted nodes came back, re-certify with the pool's profile, resume. The first
    failed batch stops the rollout (on_failure: stop): its failed nodes stay drained with the
    reason, nodes not reached keep serving. Run again after an interruption: it resumes.
    Exit 0: upgraded (or nothing to do); 1: a node failed or the rollout stopped; 2: refused.
    """
    from clusterforge.rollout.upgrade import upgrade as run_upgrade

    cluster = load(stack, spec)
    before = _base(stack, spec, base) if base else None
    if dry_run:  # changes nothing: no lock
        with state_read(cluster):
            if before is None and fallback_base and not _applied_recorded(cluster.stack):
                before = _base(stack, spec, fallback_base)
            outcome = run_upgrade(cluster, dry_run=True, base=before)
    else:
        with locked(cluster, "upgrade", wait):
            if before is None and fallback_base and not _applied_recorded(cluster.stack):
                print(f"note: no applied state recorded for stack {cluster.stack!r}: the nodes are taken to run "
                      f"{fallback_base}", file=sys.stderr)  # fmt: skip
                before = _base(stack, spec, fallback_base)
            question = f"upgrade stack {cluster.stack!r} as above?"
            outcome = run_upgrade(cluster, confirm=lambda: _ask(question, yes), base=before)
    if outcome.code:
        raise Exit(code=outcome.code)


@task(
    help={
        "stack": _HELP_STACK,
        "spec": _HELP_SPEC,
        "node": "the compute node to put on a new machine, e.g. node-002",
        "requested": "replace the nodes the health loop on the head node asks to replace (its lemons), one by one",
        "force": "replace even the only node of its pool in service, or one whose jobs do not finish",
        "yes": "do not ask (needed when there is no terminal)",
        "wait": _HELP_WAIT,
    }
)
@friendly
def replace(
    c: Context,
    stack: str = "",
    spec: str = "",
    node: str = "",
    requested: bool = False,
    force: bool = False,
    yes: bool = False,
    wait: bool = False,
) -> None:
    """Put one compute node on a new machine: drain, replace, configure, certify, admit.

    Local stacks get a new container; other providers must offer replace_node (AWS: that instance
    alone). The journal and the output name the old and new machine and GPUs. `--requested` replaces,
    one by one, the nodes the health loop on the head node asks for (its `replace_requested`: lemons of
    a pool whose policy says `on_lemon: replace`); each request is done once per hardware identity.
    Exit 0: the new machine is certified and admitted; 1: it failed; 2: refused.
    """
    from clusterforge.rollout.replace import replace as run_replace

    if bool(node) == requested:
        raise Exit(
            "give --node NAME (a compute node of the stack) or --requested (the nodes the health loop asks "
            "to replace), one of them",
            code=2,
        )
    cluster = load(stack, spec)
    with locked(cluster, "replace", wait):
        if requested:
            code = _replace_requested(cluster, force, yes)
        else:
            code = run_replace(cluster, node, force=force, yes=yes).code
    if code:
        raise Exit(code=code)


def _replace_requested(cluster: ClusterSpec, force: bool, yes: bool) -> int:
    """Each open request of the head's health loop, replaced in turn; a failed one never stops the
    others. Returns the worst exit code (2 when the loop's requests cannot be read)."""
    from datetime import UTC, datetime

    from clusterforge.health.head_state import open_requests, read_stack_head_state, record_replaced
    from clusterforge.journal import Journal, stack_dir
    from clusterforge.rollout.replace import replace as run_replace

    state, why = read_stack_head_state(cluster)
    if state is None:
        print(f"cannot read the health loop's requests: {why}", file=sys.stderr)
        return 2
    for note in state.notes:
        print(f"note: {note}", file=sys.stderr)
    journal = Journal(cluster.stack, stack_dir(cluster.stack).parent)
    todo = open_requests(state, journal)
    done = len(state.replace_requested) - len(todo)
    if not todo:
        print(f"the health loop asks to replace no node ({done} request(s) done before)")
        return 0
    print(f"the health loop asks to replace {len(todo)} node(s) ({done} done before):")
    for r in todo:
        print(f"  {r.node}: {r.strikes} strike(s) on {r.identity}, asked {r.at}: {r.why}")
    worst = 0
    for r in todo:
        code = run_replace(cluster, r.node, force=force, yes=yes).code
        if code == 0:
            record_replaced(Journal(cluster.stack, stack_dir(cluster.stack).parent), r,
                            datetime.now(UTC).isoformat(timespec="seconds"))  # fmt: skip
        else:
            print(
                f"{r.node}: the replace exited {code}; the request stays open for the next run",
                file=sys.stderr,
            )
        worst = max(worst, code)
    return worst
