"""The certify stage: hold -> single-node checks -> network check -> release or drain.

1. Every node of the batch must be registered with Slurm; it is then held (maintenance
   reservation, admission.py) so no user work lands on it while it is judged.
2. Single-node checks: ``playbooks/certify.yml`` (Ansible) puts the node's NODE.json in place,
   runs the validators profile and fetches ``report.json``/``junit.xml`` into
   ``.clusterforge/<stack>/reports/<node>/``. Then every figure is judged against the fleet
   (fleet_stage.py: this command's nodes of the same type, else the stored baseline, else the
   floor); a figure too far under its reference fails the node with the evidence.
3. Network check (network_stage.py): every node that passed must answer the controller
   (liveness.py: its Slurm state, then a one-task probe job on it alone); one that does not fails
   alone with that reason. Then rounds of pair tests planned by certify/isolate.py and run as
   concurrent Slurm jobs in the hold, each with a deadline: a verdict per node and per link. A
   small batch borrows certified idle nodes as known-good partners.
4. Verdict: pass -> leaves the hold (``idle``); fail -> DRAIN ``clusterforge: <check>: <line>``.

A node already certified (journal) is not certified again unless asked (``--recertify``, or
`certify` on demand).
"""

from __future__ import annotations

from collections import defaultdict

from clusterforge.ansible.runner import PlaybookRun, run_stamp
from clusterforge.certify.fleet.judge import FleetJudgement
from clusterforge.health.record import record_failure
from clusterforge.journal import now_iso, write_atomic
from clusterforge.node.config import dumps, profile_for, render_node_config
from clusterforge.node.reports import Verdict, merge, read_verdict, stamp_run
from clusterforge.pipeline import fleet_stage
from clusterforge.pipeline.context import StackContext
from clusterforge.pipeline.network_stage import NetworkStep
from clusterforge.pipeline.scheduler import BaseStage, StageResult
from clusterforge.providers.base import Node
from clusterforge.slurm import liveness
from clusterforge.slurm.admission import Admission, AdmissionError

REGISTER_TIMEOUT_S = 90.0


class CertifyStage(BaseStage):
    name = "certify"

    def __init__(self, ctx: StackContext, playbook: str = "certify.yml"):
        self.ctx = ctx
        self.playbook = ctx.playbooks / playbook
        self._run: PlaybookRun | None = None
        self._runs: dict[str, str] = {}  # node -> run id, over every batch of this command
        self._fleet_ctx = fleet_stage.FleetContext.for_stack(ctx.spec, ctx.options.profile, ctx.paths.reports)

    def cancel(self) -> None:
        if self._run is not None:
            self._run.cancel()

    def _wanted(self, name: str) -> bool:
        opts = self.ctx.options
        if opts.only is not None:
            return name in opts.only
        # A certification cut short (its command killed) left the node held: do it again. The
        # stack lock says no other command is certifying it now.
        interrupted = bool(self.ctx.journal.record(name).certifying)
        return opts.recertify or interrupted or not self.ctx.journal.is_done(name, "certified")

    def run(self, nodes: list[str]) -> dict[str, StageResult]:
        ctx = self.ctx
        results: dict[str, StageResult] = {}
        todo: list[Node] = []
        for name in nodes:
            node = ctx.nodes[name]
            if node.role != "gpu":
                results[name] = StageResult(True, "head/login node: not certified")
            elif not self._wanted(name):
                rec = ctx.journal.record(name)
                results[name] = StageResult(True, f"certified earlier ({rec.certified_at}); not redone")
            else:
                todo.append(node)
        if not todo:
            return results
        heads = ctx.heads()
        if not heads:
            for n in todo:
                results[n.name] = self._failed(
                    n.name, "certify", "no head node: nothing to admit the node to"
                )
            return results
        admission = Admission(ctx.runner(heads[0]))
        run_id = run_stamp()
        for n in todo:
            earlier = ctx.journal.record(n.name).certifying
            if earlier:
                ctx.board.note(n.name, f"certification in run {earlier} was cut short: certifying again")
            ctx.journal.annotate(n.name, certifying=run_id)
        for n in todo:
            ctx.board.note(n.name, "waiting for slurmd to register")
        missing = set(admission.wait_registered([n.name for n in todo], timeout_s=REGISTER_TIMEOUT_S))
        for name in sorted(missing):
            results[name] = self._failed(
                name, "slurm-registration", "slurmd never registered with the controller"
            )
        todo = [n for n in todo if n.name not in missing]
        try:
            admission.hold([n.name for n in todo])
        except AdmissionError as exc:
            for n in todo:
                results[n.name] = self._failed(n.name, "slurm-hold", str(exc))
            return results
        verdicts = self._single_node(todo, run_id)
        judgement = self._fleet(todo, run_id)
        verdicts = fleet_stage.apply(judgement, verdicts, ctx.board.note, self._fleet_ctx.error)
        verdicts = self._network(todo, verdicts, run_id, admission, heads[0])
        for n in todo:
            results[n.name] = self._decide(n, verdicts[n.name], admission, run_id)
            self._runs[n.name] = run_id
        fleet_stage.record(
            self._fleet_ctx, judgement, {n.name: verdicts[n.name].passed for n in todo}, run_id
        )
        self._html(sorted(self._runs))
        return results

    def _html(self, nodes: list[str]) -> None:
        """The people's report (reports/report.html) of this command's nodes, each from its own
        run's reports only; it never changes a verdict."""
        ctx = self.ctx
        try:
            from clusterforge.reports import write_run_html

            write_run_html(
                ctx.paths.reports,
                ctx.paths.reports / "report.html",
                stack=ctx.spec.stack,
                nodes=nodes,
                run_ids=dict(self._runs),
            )
        except (OSError, ImportError, ValueError) as exc:
            for name in nodes:
                ctx.board.note(name, f"HTML report not written: {exc}")

    # -- steps -------------------------------------------------------------------------------

    def _suite(self, node: Node) -> tuple[str, str]:
        name, prof = profile_for(self.ctx.spec, node.pool, self.ctx.options.profile)
        return name, prof.suite

    def _single_node(self, todo: list[Node], run_id: str) -> dict[str, Verdict]:
        ctx = self.ctx
        config_dir = ctx.paths.run / "node-config"
        by_suite: dict[str, list[Node]] = defaultdict(list)
        for n in todo:
            write_atomic(config_dir / n.name / "NODE.json", dumps(render_node_config(ctx.spec, n)))
            stale = ctx.paths.reports / n.name / "report.json"
            stale.parent.mkdir(parents=True, exist_ok=True)
            stale.unlink(missing_ok=True)  # never judge a node on an earlier run's report
            (stale.parent / "network-report.json").unlink(missing_ok=True)
            by_suite[self._suite(n)[1]].append(n)
            ctx.board.note(n.name, "held; running single-node checks")
        verdicts: dict[str, Verdict] = {}
        for suite, group in sorted(by_suite.items()):
            run = PlaybookRun(
                self.playbook,
                ctx.hosts_file,
                ctx.paths.run,
                limit=[n.name for n in group],
                extravars={
                    "certify_profile": suite,
                    "certify_config_dir": str(config_dir),
                    "certify_reports_dir": str(ctx.paths.reports),
                    "certify_run_id": run_id,
                },
                secrets=ctx.secrets(),
                on_update=ctx.board.host,
                env=ctx.env(),
            )
            self._run = run
            try:
                result = run.run()
            finally:
                self._run = None
            states = {n.name: n.state for n in ctx.provider.nodes(ctx.spec)}
            for n in group:
                failure = result.failures.get(n.name)
                if failure is not None or not result.host_ok(n.name):
                    state = states.get(n.name, "gone")
                    why = failure.render() if failure else f"certify.yml {result.status} (rc {result.rc})"
                    if state != "running":
                        why = f"node {state} during certification ({why})"
                    verdicts[n.name] = Verdict(n.name, False, [("certify", why)])
                else:
                    stamp_run(ctx.paths.reports / n.name / "report.json", run_id)
                    verdicts[n.name] = read_verdict(n.name, ctx.paths.reports / n.name / "report.json")
        return verdicts

    def _fleet(self, todo: list[Node], run_id: str) -> FleetJudgement | None:
        """Judge this batch's figures against the fleet (clusterforge/certify/fleet/judge.py)."""
        for n in todo:
            self.ctx.board.note(n.name, "judging figures against the fleet")
        return fleet_stage.judge(self._fleet_ctx, {n.name: n.instance_type for n in todo}, run_id)

    def _network(
        self, todo: list[Node], verdicts: dict[str, Verdict], run_id: str, admission: Admission, head: Node
    ) -> dict[str, Verdict]:
        """The network step (network_stage.py) over the nodes that passed so far, per instance type."""
        ctx = self.ctx
        group = [n for n in todo if verdicts[n.name].passed]
        if not ctx.spec.storage.shared_path or not group:
            return verdicts
        out = dict(verdicts)
        step = NetworkStep(ctx, admission, head, run_id, self._suite(group[0])[1])
        # A node that does not answer the controller fails alone, before any multi-node job.
        silent = step.unresponsive([n.name for n in group])
        for name, why in silent.items():
            out[name] = merge(out[name], Verdict(name, False, [(liveness.CHECK_ID, why)]))
        by_type: dict[str, list[Node]] = defaultdict(list)
        for n in group:
            if n.name not in silent:
                by_type[n.instance_type].append(n)
        for nodes in by_type.values():
            net = step.run(nodes, {n.name for n in todo})
            for n in nodes:
                out[n.name] = merge(out[n.name], net.verdicts[n.name])
                if net.verdicts[n.name].note:
                    ctx.board.note(n.name, f"network: {net.verdicts[n.name].note}")
        return out

    def _decide(self, node: Node, verdict: Verdict, admission: Admission, run_id: str) -> StageResult:
        ctx = self.ctx
        profile = self._suite(node)[0]
        report = str(ctx.paths.reports / node.name / "report.json")
        if verdict.passed:
            try:
                admission.release(node.name)
            except AdmissionError as exc:
                return self._failed(node.name, "slurm-release", str(exc))
            ctx.journal.mark_done(
                node.name,
                "certified",
                verdict="pass",
                certified_at=now_iso(),
                profile=profile,
                report=report,
                run_id=run_id,
                certifying="",
            )
            return StageResult(True, "certified and admitted")
        check, line = verdict.first_failure
        try:
            reason = admission.fail(node.name, check, line)
        except AdmissionError as exc:
            reason = f"clusterforge: {check}: {line} (and draining failed: {exc})"
        ctx.journal.mark_failed(
            node.name,
            "certified",
            reason,
            verdict="fail",
            certified_at=now_iso(),
            profile=profile,
            report=report,
            run_id=run_id,
            certifying="",
        )
        # A strike on its hardware (clusterforge.health): the verdict alone is overwritten by the next pass.
        record_failure(ctx.journal, node.name, reason, check)
        return StageResult(False, reason)

    def _failed(self, name: str, check: str, line: str) -> StageResult:
        reason = f"clusterforge: {check}: {line}"
        self.ctx.journal.mark_failed(
            name, "certified", reason, verdict="fail", certified_at=now_iso(), certifying=""
        )
        return StageResult(False, reason)
