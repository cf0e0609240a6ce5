"""The rollout's steps on a real stack (``executor.UpgradeSteps``): Slurm through the head node,
Ansible for the converge, the certify pipeline for re-certification.

- drain: ``scontrol update State=DRAIN Reason="clusterforge: upgrading"``, then wait until sinfo
  says ``drained`` (no job left; ``draining`` while one runs). What still runs at the deadline is
  named from ``squeue -h -t RUNNING -o "%i %N"``.
- requeue: ``scontrol requeue <job>`` for each job still running there (scontrol(1),
  slurm.schedmd.com/scontrol.html; slurm_requeue(3): "Requeue a running or pending SLURM batch
  job. The job script will be restarted from its beginning"), then wait for the drain again.
- converge: ``playbooks/site.yml`` limited to the batch. The converge's record (the plan's base)
  is written only once a node is re-certified, so a rollout cut short between the two still
  plans that node as changed and does it again.
- reboot: the nvidia_driver role reboots a node inline during the converge
  (roles/nvidia_driver/tasks/gpu.yml, ``ansible.builtin.reboot``); this step checks the node came
  back: running at the provider and answering the Slurm controller.
- re-certify: the certify pipeline (hold, checks, fleet judging, network) on the batch alone,
  each node with its pool's profile; it releases the nodes that pass and drains those that fail.
- resume: leave the hold and RESUME a node drained by clusterforge (never a person's drain).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console

from clusterforge.ansible.runner import PlaybookRun
from clusterforge.cluster_secrets import SecretError
from clusterforge.images.boot import boot_digests
from clusterforge.inventory import render_inventory, write_inventory
from clusterforge.pipeline.context import Options, StackContext
from clusterforge.pipeline.display import Board
from clusterforge.pipeline.up import EXIT_INTERRUPTED, Seams, certify, stack_context
from clusterforge.plan.live import SQUEUE_RUNNING, parse_squeue_jobs
from clusterforge.providers.base import Node, Provider
from clusterforge.rollout.identity import fresh_journal
from clusterforge.slurm.admission import Admission, AdmissionError
from clusterforge.spec.models import ClusterSpec

BACK_TIMEOUT_S = 600.0  # a rebooted node must answer the controller again within this


class StepError(Exception):
    """A step cannot run at all (no head node, Slurm not answering); the message says why."""


class ClusterSteps:
    def __init__(
        self,
        spec: ClusterSpec,
        provider: Provider,
        seams: Seams,
        console: Console,
        back_timeout_s: float = BACK_TIMEOUT_S,
        poll_s: float = 5.0,
        sleep: Callable[[float], None] | None = None,
    ):
        self.spec = spec
        self.provider = provider
        self.seams = seams
        self.console = console
        self.back_timeout_s = back_timeout_s
        self.poll_s = poll_s
        self._sleep = sleep
        self.ctx: StackContext = stack_context(
            spec, provider, Options(), Board([], console, live=False), seams
        )
        self.refresh()

    # -- plumbing ----------------------------------------------------------------------------

    def refresh(self) -> dict[str, Node]:
        self.ctx.nodes = {n.name: n for n in self.provider.nodes(self.spec)}
        return self.ctx.nodes

    def _run(self) -> Callable[[list[str]], tuple[int, str, str]]:
        heads = [h for h in self.ctx.heads() if h.state == "running"]
        if not heads:
            raise StepError(f"stack {self.spec.stack!r} has no running head node: Slurm cannot be asked")
        return self.ctx.runner(heads[0], timeout_s=60)

    def admission(self) -> Admission:
        return Admission(self._run())

    def jobs(self, nodes: Sequence[str]) -> dict[str, list[str]]:
        """Job ids running on each of ``nodes`` now."""
        rc, out, err = self._run()(list(SQUEUE_RUNNING))
        if rc != 0:
            raise StepError(f"`{' '.join(SQUEUE_RUNNING)}` exited {rc}: {(err or out).strip()}")
        running = parse_squeue_jobs(out)
        return {n: running.get(n, []) for n in nodes}

    def _wait(self, nodes: Sequence[str], timeout_s: int) -> dict[str, str]:
        kwargs = {"sleep": self._sleep} if self._sleep else {}
        busy = self.admission().wait_drained(nodes, timeout_s, poll_s=self.poll_s, **kwargs)
        if not busy:
            return {}
        jobs = self.jobs(busy)
        return {
            n: f"drain timed out after {timeout_s} s: job(s) {', '.join(jobs[n]) or '(none listed)'} still running"
            for n in busy
        }

    # -- the steps ---------------------------------------------------------------------------

    def drain(self, nodes: Sequence[str], reason: str, timeout_s: int) -> dict[str, str]:
        self.admission().drain(nodes, reason)  # one scontrol for the whole batch (a host list)
        return self._wait(nodes, timeout_s)

    def requeue(self, nodes: Sequence[str], timeout_s: int) -> dict[str, str]:
        run = self._run()
        for name, ids in self.jobs(nodes).items():
            for job in ids:
                rc, out, err = run(["scontrol", "requeue", job])
                if rc != 0:
                    self.console.print(
                        f"{name}: `scontrol requeue {job}` exited {rc}: {(err or out).strip()}",
                        style="yellow",
                    )
        return self._wait(nodes, timeout_s)

    def converge(self, nodes: Sequence[str]) -> dict[str, str]:
        ctx = self.ctx
        live = self.refresh()
        missing = [n for n in nodes if n not in live or live[n].state != "running"]
        outputs_of = getattr(self.provider, "stack_outputs", None)
        outputs = outputs_of(self.spec) if callable(outputs_of) else None
        write_inventory(
            render_inventory(
                self.spec,
                list(live.values()),
                ctx.paths.munge_key,
                outputs=outputs,
                image_digests=boot_digests(self.spec, lambda _node, _line: None),
            ),
            ctx.paths.inventory,
        )
        targets = [n for n in nodes if n not in missing]
        failures = {n: f"node is {live[n].state if n in live else 'absent'}" for n in missing}
        if not targets:
            return failures
        try:
            # A runner without the stack's state (CI) gets the cluster's key, never a new one.
            ctx.before_converge()
        except SecretError as exc:
            return {**failures, **dict.fromkeys(targets, f"munge key: {exc}")}
        run = PlaybookRun(
            ctx.playbooks / "site.yml",
            ctx.hosts_file,
            ctx.paths.run,
            limit=targets,
            secrets=ctx.secrets,
            env=ctx.env(),
        )
        result = run.run()
        ctx.after_converge()  # the run scrubbed its artifacts with a key it created; keep it
        ctx.journal = fresh_journal(self.spec.stack)  # certify wrote through its own instance
        for name in targets:
            if result.host_ok(name):
                host = result.hosts.get(name)
                if host is not None and host.changed:
                    ctx.journal.invalidate(name, "certified")
                ctx.journal.mark_done(name, "configured")
                continue
            failure = result.failures.get(name)
            why = (
                failure.render()
                if failure
                else f"site.yml {result.status} (rc {result.rc}); log: {result.log}"
            )
            ctx.journal.mark_failed(name, "configured", why)
            failures[name] = why
        return failures

    def reboot(self, nodes: Sequence[str]) -> dict[str, str]:
        live = self.refresh()
        # Where the connection cannot survive a reboot (AWS over SSM) the driver role left it to us:
        # the provider reboots those nodes, and they converge again (their services start then).
        finish = getattr(self.provider, "reboot_pending", None)
        if callable(finish):
            here = [live[n] for n in nodes if n in live and live[n].state == "running"]
            rebooted, problems = finish(self.spec, here, self.ctx.runner)
            again = self.converge(rebooted) if rebooted else {}
            bad = {n: f"reboot: {why}" for n, why in problems.items()}
            bad.update({n: f"converge after the reboot: {why}" for n, why in again.items()})
            if bad:
                return bad
            live = self.refresh()
        failures = {
            n: f"did not come back from its reboot: provider state {live[n].state if n in live else 'absent'}"
            for n in nodes
            if n not in live or live[n].state != "running"
        }
        waiting = [n for n in nodes if n not in failures]
        silent = self.admission().wait_registered(waiting, timeout_s=self.back_timeout_s)
        for name in silent:
            failures[name] = (
                f"did not come back from its reboot: slurmd not answering after {self.back_timeout_s:.0f} s"
            )
        return failures

    def recertify(self, nodes: Sequence[str]) -> dict[str, str]:
        outcome = certify(self.spec, list(nodes), None, console=self.console, seams=self.seams)
        if outcome.code == EXIT_INTERRUPTED:
            raise KeyboardInterrupt
        failures = {}
        for name in nodes:
            p = outcome.progress.get(name)
            if p is None:
                failures[name] = f"not certified (certify exited {outcome.code})"
            elif name in outcome.failed:
                failures[name] = p.reason or f"{p.status.value} at {p.stage}"
        return failures

    def resume(self, nodes: Sequence[str]) -> dict[str, str]:
        try:
            self.admission().release(nodes)  # one sinfo, one RESUME of the batch's host list
        except AdmissionError as exc:
            return dict.fromkeys(nodes, str(exc))
        return {}

    def fail(self, node: str, reason: str) -> None:
        try:
            self.admission().drain(node, reason)
        except (AdmissionError, StepError) as exc:
            self.console.print(
                f"{node}: could not drain with {reason!r}: {exc}", style="red", highlight=False
            )
