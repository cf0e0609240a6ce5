"""up, down, status, certify: the cluster's life cycle (thin: parse, call clusterforge, print)."""

from __future__ import annotations

import json as jsonlib
import sys
from pathlib import Path

from invoke import Context, task
from invoke.exceptions import Exit
from rich.console import Console

from clusterforge.spec.models import ClusterSpec
from clusterforge.tasks._cli import friendly, locked, state_read

_HELP_STACK = "stack name: stacks/NAME.yaml"
_HELP_SPEC = "path of a spec file (instead of --stack)"
_HELP_WAIT = "when another command holds the stack's lock, wait for it instead of exiting 2"


def load(stack: str, spec: str) -> ClusterSpec:
    """The spec, schema- and semantically checked; errors as FILE:LINE: key: message."""
    from clusterforge.spec.checks import check_file
    from clusterforge.spec.loader import stack_path

    if bool(stack) == bool(spec):
        raise Exit("give exactly one of --stack NAME or --spec PATH", code=2)
    report = check_file(Path(spec) if spec else stack_path(stack), [])
    if not report.ok or report.spec is None:
        raise Exit("\n".join(f.render() for f in report.errors) or "the spec is not valid", code=1)
    return report.spec


def with_compute_count(spec: ClusterSpec, count: int) -> ClusterSpec:
    """The spec with its (first) compute pool resized, for `up --nodes N`."""
    if count < 1:
        raise Exit(f"--nodes {count}: give at least 1 compute node", code=2)
    pools = list(spec.node_pools)
    for i, pool in enumerate(pools):
        if pool.role == "gpu":
            pools[i] = pool.model_copy(update={"count": count})
            return spec.model_copy(update={"node_pools": pools})
    raise Exit(f"stack {spec.stack!r} has no compute (role: gpu) pool to resize", code=2)


@task(
    help={
        "stack": _HELP_STACK,
        "spec": _HELP_SPEC,
        "nodes": "number of compute nodes (overrides the spec's compute pool count)",
        "dry_run": "print the plan (nodes, playbooks, checks) and change nothing",
        "recertify": "certify nodes again even when the journal says they passed",
        "converge": "run Ansible on every node, even where inputs and digest are unchanged",
        "wait": _HELP_WAIT,
        "allow_replace": "comma-separated data-holding resources (e.g. prod-fsx) this run may replace or "
        "delete; without it `up` refuses any such change (`invoke plan` lists them)",
    }
)
@friendly
def up(
    c: Context,
    stack: str = "",
    spec: str = "",
    nodes: int = 0,
    dry_run: bool = False,
    recertify: bool = False,
    converge: bool = False,
    wait: bool = False,
    allow_replace: str = "",
) -> None:
    """Bring a stack up: provision -> configure -> certify -> admit, node by node.

    Each node moves on as soon as it is ready; a failing node is drained/quarantined with the
    reason and the others go on. Ends with a summary; exit 1 if any node failed. Running it again
    resumes; on a converged stack it changes nothing and certifies nothing (unless --recertify):
    a node whose inputs and digest of managed state are those of its last converge is skipped
    ("unchanged since 12:03, digest matches"); --converge runs Ansible on every node anyway.
    """
    from clusterforge.pipeline.context import Options
    from clusterforge.pipeline.up import up as run_up

    cluster = load(stack, spec)
    if nodes:
        cluster = with_compute_count(cluster, nodes)
    if dry_run:  # changes nothing: no lock needed
        with state_read(cluster):
            outcome = run_up(cluster, Options(recertify=recertify), dry_run=True)
    else:
        allowed = frozenset(n.strip() for n in allow_replace.split(",") if n.strip())
        with locked(cluster, "up", wait):
            outcome = run_up(cluster, Options(recertify=recertify, converge=converge, allow_replace=allowed))
    if outcome.code:
        raise Exit(code=outcome.code)


@task(
    help={
        "stack": _HELP_STACK,
        "spec": _HELP_SPEC,
        "nodes": "comma-separated compute node names (default: all compute nodes)",
        "profile": "certification profile of the spec to use (default: each pool's own)",
        "wait": _HELP_WAIT,
    }
)
@friendly
def certify(
    c: Context, stack: str = "", spec: str = "", nodes: str = "", profile: str = "", wait: bool = False
) -> None:
    """Certify nodes now: hold them in Slurm, run the checks, then release (pass) or drain (fail)."""
    from clusterforge.pipeline.up import certify as run_certify

    cluster = load(stack, spec)
    if profile and profile not in cluster.certification.profiles:
        known = ", ".join(sorted(cluster.certification.profiles)) or "none"
        raise Exit(
            f"--profile {profile!r}: not in certification.profiles of the spec (known: {known})", code=2
        )
    names = [n.strip() for n in nodes.split(",") if n.strip()] or None
    with locked(cluster, "certify", wait):
        outcome = run_certify(cluster, names, profile or None)
    if outcome.code:
        raise Exit(code=outcome.code)


@task(
    help={
        "stack": _HELP_STACK,
        "spec": _HELP_SPEC,
        "json": "print JSON (a list, one object per node)",
        "wide": "a row per node, every column whole (default: a row per node that fits 80 columns; "
        "over 32 nodes a summary by state and the nodes that need a look)",
    }
)
@friendly
def status(c: Context, stack: str = "", spec: str = "", json: bool = False, wide: bool = False) -> None:
    """Provider state, configured, certification verdict and time, Slurm state and reason per node;
    over 32 nodes a summary by state per pool and the nodes that need a look (--wide: every row).

    Never takes the stack's lock (it only reads); says so when another command holds it."""
    from clusterforge.providers import get_provider
    from clusterforge.state import holder as current_holder
    from clusterforge.status import DETAIL_LIMIT, collect, summary, table

    cluster = load(stack, spec)
    with state_read(cluster):
        rows = collect(cluster, get_provider(cluster))
    holder = current_holder(cluster)
    if json:
        print(jsonlib.dumps([r.as_dict() for r in rows], indent=2))
    elif wide or len(rows) <= DETAIL_LIMIT:
        Console().print(table(cluster, rows, wide=wide))
    else:
        Console().print(summary(cluster, rows))
    if holder is not None:
        print(f"stack {cluster.stack!r} is busy: {holder.describe()}", file=sys.stderr)


@task(
    help={
        "stack": _HELP_STACK,
        "spec": _HELP_SPEC,
        "yes": "do not ask (needed when there is no terminal)",
        "wait": _HELP_WAIT,
    }
)
@friendly
def down(c: Context, stack: str = "", spec: str = "", yes: bool = False, wait: bool = False) -> None:
    """Destroy a stack: its nodes, network and volumes (asks first, naming the stack and what goes)."""
    cluster = load(stack, spec)
    if cluster.provider.kind == "static":  # nothing of the machines is clusterforge's to destroy
        from clusterforge.providers.static import REFUSE_DOWN

        raise Exit(REFUSE_DOWN.format(stack=cluster.stack), code=2)
    with locked(cluster, "down", wait):
        _down(cluster, yes)


def _down(cluster: ClusterSpec, yes: bool) -> None:
    from clusterforge.journal import Journal, stack_dir
    from clusterforge.providers import get_provider

    provider = get_provider(cluster)
    existing = provider.nodes(cluster)
    what = (
        f"stack {cluster.stack!r}: {len(existing)} node(s) ({', '.join(n.name for n in existing) or 'none'})"
    )
    what += " and the stack's network and volumes"
    at_risk = getattr(provider, "data_at_risk", None)  # aws: the file system and bucket contents
    if at_risk is not None:
        what += "".join(f"; data: {line}" for line in at_risk(cluster))
    billing = getattr(provider, "keeps_billing", None)  # aws: capacity reservations stay
    kept = billing(cluster) if callable(billing) else []
    what += "".join(f"; NOT destroyed: {line}" for line in kept)
    if not yes:
        if not sys.stdin.isatty():
            raise Exit(f"refusing to destroy {what} without a terminal to confirm: add --yes", code=2)
        answer = input(f"Destroy {what}? Type the stack name to confirm: ").strip()
        if answer != cluster.stack:
            raise Exit("not confirmed: nothing destroyed", code=1)
    summary = provider.destroy(cluster)
    Journal(cluster.stack, stack_dir(cluster.stack).parent).forget()
    print(f"stack {cluster.stack!r}: {summary.render()}")
    for line in kept:
        print(f"still billing: {line}")
