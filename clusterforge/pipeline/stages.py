"""The three stages of `up`: provision, configure, certify (+ admit). Each journals per node.

- provision: the provider brings every node up (idempotent); the journal ties each node to the
  machine behind it (a replaced container starts over); the inventory is rendered.
- configure: ``playbooks/site.yml`` limited to the batch. A compute node never runs before its
  head node's configuration: it goes in the head's batch (site.yml runs the controller play
  first) or after it; a failed head blocks the compute nodes. A node whose inputs and digest
  are those its last converge recorded is skipped ("unchanged since 12:03, digest matches",
  clusterforge/drift/); the rest converge, the reason (what changed) leading their result;
  ``up --converge`` converges all. A change on a certified node makes its certification stale.
- certify: compute nodes only (see certify_stage.py).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from clusterforge.ansible.runner import PlaybookRun
from clusterforge.ansible.scale import forget_facts
from clusterforge.cluster_secrets import SecretError
from clusterforge.drift.decide import Decision
from clusterforge.drift.nodes import decisions as drift_decisions
from clusterforge.drift.nodes import nodes_now, record_baselines
from clusterforge.images.boot import boot_digests
from clusterforge.inventory import render_inventory, write_inventory
from clusterforge.pipeline.context import StackContext
from clusterforge.pipeline.scheduler import BaseStage, Gate, NodeProgress, StageResult, Status
from clusterforge.plan.applied import record_converged


class ProvisionStage(BaseStage):
    name = "provision"

    def __init__(self, ctx: StackContext):
        self.ctx = ctx

    def gate(self, node: str, progress: dict[str, NodeProgress]) -> tuple[Gate, str]:
        # One batch for all: the provider creates the stack as a whole (network, volumes, nodes).
        here = [p for p in progress.values() if p.stage == self.name]
        ready = all(p.status is Status.WAITING for p in here)
        return (Gate.OPEN, "") if ready else (Gate.WAIT, "")

    def run(self, nodes: list[str]) -> dict[str, StageResult]:
        ctx = self.ctx
        allow = getattr(ctx.provider, "allow_replace", None)
        if callable(allow):
            allow(ctx.options.allow_replace)
        created = ctx.provider.create(ctx.spec, ctx.board.note)
        with ctx.lock:
            ctx.nodes = {n.name: n for n in created}
        results: dict[str, StageResult] = {}
        for name in nodes:
            node = ctx.nodes.get(name)
            if node is None:
                results[name] = StageResult(False, "the provider did not bring this node up")
                continue
            if node.state != "running":
                ctx.journal.mark_failed(name, "provisioned", f"provider state {node.state}")
                results[name] = StageResult(False, f"provider state {node.state}")
                continue
            if ctx.journal.observe(name, node.provider_id):
                ctx.board.note(name, "new machine behind this node: starting over")
            if not ctx.journal.is_done(name, "provisioned"):
                ctx.journal.mark_done(name, "provisioned")
            results[name] = StageResult(True)
        # Providers with stack outputs (aws) hand over what the inventory needs beside the nodes.
        stack_outputs = getattr(ctx.provider, "stack_outputs", None)
        outputs = stack_outputs(ctx.spec) if callable(stack_outputs) else None
        inv = render_inventory(
            ctx.spec,
            list(ctx.nodes.values()),
            ctx.paths.munge_key,
            outputs=outputs,
            image_digests=boot_digests(ctx.spec, ctx.board.note),
        )
        write_inventory(inv, ctx.paths.inventory)
        return results


class ConfigureStage(BaseStage):
    name = "configure"

    def __init__(self, ctx: StackContext, playbook: str = "site.yml"):
        self.ctx = ctx
        self.playbook = ctx.playbooks / playbook
        self._run: PlaybookRun | None = None

    def gate(self, node: str, progress: dict[str, NodeProgress]) -> tuple[Gate, str]:
        heads = [n.name for n in self.ctx.heads() if n.name in progress]
        if node in heads:
            return Gate.OPEN, ""
        for head in heads:
            p = progress[head]
            if p.status is Status.FAILED or p.status is Status.CANCELLED:
                return Gate.BLOCKED, f"head node {head} failed ({p.reason}): no Slurm controller to join"
            if p.passed_stage(self.name):
                continue
            # Waiting for configure too: both go in this batch, one Ansible run, where site.yml's
            # controller play runs before the compute play. Head still running: wait for it.
            if not (p.stage == self.name and p.status is Status.WAITING):
                return Gate.WAIT, ""
        return Gate.OPEN, ""

    def cancel(self) -> None:
        if self._run is not None:
            self._run.cancel()

    def run(self, nodes: list[str]) -> dict[str, StageResult]:
        ctx = self.ctx
        live = {n: ctx.nodes[n] for n in nodes if n in ctx.nodes}
        now = nodes_now(ctx.spec, live.values(), ctx.paths.inventory, ctx.playbooks)
        decided = drift_decisions(ctx.journal, live, now, ctx.runner, force=ctx.options.converge)
        out: dict[str, StageResult] = {}
        for name, decision in decided.items():
            if not decision.converge:
                ctx.journal.mark_done(name, "configured")
                out[name] = StageResult(True, decision.why)
        rest = [n for n in nodes if n not in out]
        for name in rest:
            if name in decided and decided[name].changes:
                ctx.board.note(name, decided[name].why)
        if rest:
            out.update(self._converge(rest, decided))
            out.update(self._reboots([n for n in rest if out[n].ok], decided))
            converged = {n: live[n] for n in rest if n in live and out[n].ok}
            record_baselines(ctx.journal, converged, now, ctx.runner)
        return out

    def _reboots(self, nodes: list[str], decided: dict[str, Decision]) -> dict[str, StageResult]:
        """Providers whose connection cannot survive a reboot (AWS over SSM) reboot the nodes the
        driver role left one to, then those nodes converge again (services that need the new
        module start then)."""
        ctx = self.ctx
        finish = getattr(ctx.provider, "reboot_pending", None)
        if not callable(finish) or not nodes:
            return {}
        # Only compute nodes run the driver role (playbooks/node_software.yml on gpu_nodes).
        compute = [ctx.nodes[n] for n in nodes if n in ctx.nodes and ctx.nodes[n].role == "gpu"]
        if not compute:
            return {}
        rebooted, problems = finish(ctx.spec, compute, ctx.runner)
        out = {n: StageResult(False, f"reboot: {why}") for n, why in problems.items()}
        for n, why in problems.items():
            ctx.journal.mark_failed(n, "configured", f"reboot: {why}")
        if rebooted:
            for n in rebooted:
                ctx.board.note(n, "rebooted into the installed driver: converging again")
            out.update(self._converge(rebooted, decided))
        return out

    def _converge(self, nodes: list[str], decided: dict[str, Decision]) -> dict[str, StageResult]:
        ctx = self.ctx
        try:
            ctx.before_converge()
        except SecretError as exc:
            return {name: StageResult(False, f"munge key: {exc}") for name in nodes}
        # Facts are cached between runs (ansible/scale.py): a machine not yet configured (new, or
        # replaced under the same name) gathers its own.
        forget_facts(ctx.paths.state, [n for n in nodes if not ctx.journal.is_done(n, "configured")])
        run = PlaybookRun(
            self.playbook,
            ctx.hosts_file,
            ctx.paths.run,
            limit=nodes,
            # A callable: the munge key may be created by this very run (PlaybookRun asks again).
            secrets=ctx.secrets,
            on_update=ctx.board.host,
            env=ctx.env(),
        )
        self._run = run
        # Providers whose nodes run under a CPU share (local containers) lift it where it only
        # slows the converge (the head nodes'), for the run.
        converging = getattr(ctx.provider, "converging", None)
        speed: AbstractContextManager[Any] = (
            converging(ctx.spec, nodes, ctx.board.note) if callable(converging) else nullcontext()
        )
        try:
            with speed:
                result = run.run()
        finally:
            self._run = None
        # The munge key may have been created (or read from the controller) by this very run (the run
        # scrubbed its artifacts with it at its end): keep it with the cluster.
        try:
            ctx.after_converge()
        except SecretError as exc:
            ctx.board.note(ctx.spec.stack, f"munge key: {exc}")
        out: dict[str, StageResult] = {}
        failed_heads = [h.name for h in ctx.heads() if h.name in nodes and not result.host_ok(h.name)]
        for name in nodes:
            host = result.hosts.get(name)
            changed = host.changed if host else 0
            failure = result.failures.get(name)
            if failure is not None:
                reason = failure.render()
            elif failed_heads and ctx.nodes[name].role != "head":
                # Converged or not, a compute node without its controller cannot be admitted.
                head = failed_heads[0]
                why = result.failures[head].render() if head in result.failures else "did not converge"
                reason = f"head node {head} failed ({why}): no Slurm controller to join"
            elif result.host_ok(name):
                if changed and ctx.journal.is_done(name, "certified"):
                    ctx.journal.invalidate(name, "certified")
                    ctx.board.note(name, f"{changed} change(s) on a certified node: certification is stale")
                ctx.journal.mark_done(name, "configured")
                what = (
                    ", ".join(host.changed_tasks[:3]) + (" …" if len(host.changed_tasks) > 3 else "")
                    if host
                    else ""
                )
                # Where a baseline existed, say first why the node was converged (what drifted).
                why = decided[name].why + " -> " if name in decided and decided[name].changes else ""
                out[name] = StageResult(
                    True, why + f"{changed} changed" + (f": {what}" if what else ""), changed=changed
                )
                continue
            elif result.status in ("canceled", "timeout"):
                reason = f"site.yml {result.status}"
            elif result.failures:
                # Ansible ends a playbook when every host of a play failed: later plays never ran here.
                first = next(iter(result.failures.values()))
                reason = f"site.yml stopped before this host's plays ran, after: {first.render()}"
            else:
                reason = f"site.yml exited {result.rc} before this host finished; log: {result.log}"
            ctx.journal.mark_failed(name, "configured", reason)
            out[name] = StageResult(False, reason, changed=changed)
        # What `invoke plan` compares with next time: the inputs these nodes converged with.
        record_converged(ctx.journal, ctx.spec, [n for n, r in out.items() if r.ok])
        return out
