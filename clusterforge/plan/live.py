"""The stack as it is now, for a plan: the provider's nodes and steps, Slurm's states and jobs.

Everything here is asked, never changed. What cannot be asked (no head node running, no
container engine, no Pulumi CLI) becomes a note in the plan, not an error: a pull request's plan
against a git ref is still right about configuration without a live cluster.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from clusterforge.node.remote import Runner, node_runner
from clusterforge.plan.impact import LiveNode, LiveState
from clusterforge.providers.base import Node, Provider
from clusterforge.slurm.admission import Admission, AdmissionError
from clusterforge.slurm.parse import expand_hostlist
from clusterforge.spec.models import ClusterSpec

# squeue(1) (Slurm 22.05.8, manpages.ubuntu.com/manpages/lunar/man1/squeue.1.html): -h no header,
# -t RUNNING only running jobs, -o "%i %N": job id (array jobs as <base>_<index>) and the host
# list allocated to it (compressed, e.g. node-[001-003]).
SQUEUE_RUNNING = ["squeue", "-h", "-t", "RUNNING", "-o", "%i %N"]


# preview(stack_name) -> what the Pulumi preview would do to each node's instance
# (``PreviewSummary.nodes``: create | update | replace | delete). Tests pass a fake here.
Previewer = Callable[[str], dict[str, str]]


def pulumi_previewer(stack_name: str) -> dict[str, str]:
    """The real seam: the Pulumi preview of the stack program through the Automation API."""
    from clusterforge.providers.aws.automation import StackDriver

    return StackDriver(stack_name).preview().nodes


def parse_squeue_jobs(text: str) -> dict[str, list[str]]:
    """``squeue -h -o "%i %N"`` rows -> node name -> job ids running there."""
    jobs: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) != 2:
            continue  # a job without nodes (pending) prints an empty host list
        for node in expand_hostlist(parts[1]):
            jobs.setdefault(node, []).append(parts[0])
    return jobs


def provider_steps(
    spec: ClusterSpec, provider: Provider, previewer: Previewer = pulumi_previewer
) -> dict[str, str]:
    """What the provider would do to each node: the Pulumi preview's steps for AWS (instances are
    named after their nodes), the provider's own plan (create / start / keep) otherwise."""
    if spec.provider.kind == "aws":
        steps = dict(previewer(spec.stack))
        for pool in spec.node_pools:
            for name in spec.node_names(pool):
                steps.setdefault(name, "keep")
        return steps
    return {p.name: p.action for p in provider.plan(spec)}


def slurm_view(
    heads: list[Node], runner: Callable[..., Runner] = node_runner
) -> tuple[dict[str, tuple[str, bool]], dict[str, list[str]], str]:
    """(node -> (state, serving), node -> running job ids, why not) through the first running head."""
    for head in heads:
        if head.state != "running":
            continue
        run = runner(head, timeout_s=30)
        try:
            states = {n: (s.display, s.serving) for n, s in Admission(run).nodes().items()}
        except AdmissionError as exc:
            return {}, {}, f"Slurm on {head.name}: {exc}"
        rc, out, err = run(SQUEUE_RUNNING)
        if rc != 0:
            return states, {}, f"squeue on {head.name} exited {rc}: {err.strip() or out.strip()}"
        return states, parse_squeue_jobs(out), ""
    return {}, {}, "no running head node: Slurm not asked (nodes in service unknown)"


def live_state(
    spec: ClusterSpec,
    provider: Provider,
    runner: Callable[..., Runner] = node_runner,
    previewer: Previewer = pulumi_previewer,
) -> LiveState:
    notes: list[str] = []
    try:
        existing = provider.nodes(spec)
        steps = provider_steps(spec, provider, previewer)
    except Exception as exc:  # any provider failure only narrows the plan; it is said, not hidden
        if os.environ.get("CLUSTERFORGE_DEBUG") == "1":
            raise
        why = f"{type(exc).__name__}: {exc}"
        return LiveState(notes=(f"provider not asked ({why}): provision follows the spec diff only",))
    # AWS: what the (refreshed) preview would do to the file system and the checkpoint bucket.
    data_changes = getattr(provider, "data_changes", None)
    data = tuple(data_changes(spec)) if callable(data_changes) else ()
    if not existing:
        return LiveState(
            steps=steps, notes=(f"stack {spec.stack!r} has no nodes now: nothing in service",), data=data
        )
    states, jobs, why = slurm_view([n for n in existing if n.role == "head"], runner)
    if why:
        notes.append(why)
    nodes = {}
    for n in existing:
        state, serving = states.get(n.name, ("", False))
        nodes[n.name] = LiveNode(
            n.name,
            exists=True,
            state=n.state,
            serving=serving and n.state == "running",
            slurm_state=state,
            jobs=tuple(jobs.get(n.name, ())),
            pool=n.pool,
        )
    return LiveState(nodes=nodes, steps=steps, notes=tuple(notes), data=data)
