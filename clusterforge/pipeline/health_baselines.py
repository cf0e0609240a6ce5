"""The stored baselines, copied to the health loop's shared folder at the end of `up` and `certify`.

The loop on the head node judges its scheduled checks against ``<shared>/clusterforge-health/<stack>/
baselines/`` (docs/health.md); the certifications that record the baselines run on the workstation.
So where the spec runs the loop, each `up` and `certify` that leaves a controller in service copies the
workstation's ``<state>/<stack>/baselines/*.json`` there (playbooks/health_baselines.yml: Ansible's own
transport, so SSH, SSM and container nodes alike; unchanged files are not sent again). A failed copy
fails no node: the run says so, with the fix, and the loop keeps judging against its last copy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.ansible.runner import PlaybookResult, PlaybookRun
from clusterforge.certify.fleet.baseline import BaselineStore
from clusterforge.health.loop.config import STATE_FOLDER
from clusterforge.health.loop.render import loop_enabled
from clusterforge.pipeline.context import StackContext
from clusterforge.pipeline.scheduler import NodeProgress, Status

PLAYBOOK = "health_baselines.yml"


@dataclass(frozen=True)
class Published:
    """What the step did: ``ok`` False only when a copy was tried and failed; ``line`` says it."""

    ok: bool
    line: str


def destination(ctx: StackContext) -> str:
    """The folder the loop reads: its ``BaselineStore`` under the shared state dir (health/loop/round.py)."""
    return str(BaselineStore(ctx.spec.stack, root=Path(f"{ctx.spec.storage.shared_path}/{STATE_FOLDER}")).dir)


def _run_playbook(ctx: StackContext, head: str, src: Path, dest: str) -> PlaybookResult:
    run = PlaybookRun(
        ctx.playbooks / PLAYBOOK,
        ctx.hosts_file,
        ctx.paths.run,
        limit=[head],
        extravars={"health_baselines_src": str(src), "health_baselines_dest": dest},
        secrets=ctx.secrets,
        env=ctx.env(),
    )
    return run.run()


def publish_baselines(
    ctx: StackContext,
    progress: Mapping[str, NodeProgress],
    run_playbook: Callable[..., Any] = _run_playbook,
) -> Published | None:
    """Copy the baselines to the loop's folder on the first head node; None when there is nothing to do
    (no loop in the spec, no baseline stored yet, or no head that ended this run in service)."""
    if not loop_enabled(ctx.spec):
        return None
    store = BaselineStore(ctx.spec.stack, ctx.paths.state.parent)
    files = len(store.types())
    if not files:
        return None
    heads = [h.name for h in ctx.heads() if h.name in progress and progress[h.name].status is Status.DONE]
    if not heads:
        return None
    head, dest = heads[0], destination(ctx)
    result = run_playbook(ctx, head, store.dir, dest)
    if result.host_ok(head):
        changed = result.hosts[head].changed if head in result.hosts else 0  # the folder's creation too
        return Published(True, f"baselines: {files} file(s) in {head}:{dest} ({changed} Ansible change(s))")
    failure = result.failures.get(head)
    why = (
        failure.render() if failure is not None else f"the playbook ended {result.status} (log {result.log})"
    )
    return Published(
        False,
        f"baselines: not copied to {head}:{dest}: {why}; the health loop judges against its last copy "
        "until the next `invoke up` or `invoke certify` copies them",
    )
