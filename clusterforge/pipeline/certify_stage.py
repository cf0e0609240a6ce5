"""The certify stage: hold -> single-node checks -> network check -> release or drain.

1. Every node of the batch must be registered with Slurm; it is then held (maintenance
   reservation, admission.py) so no user work lands on it while it is judged.
2. Single-node checks: ``playbooks/certify.yml`` (Ansible) puts the node's NODE.json in place,
   runs the validators profile and fetches ``report.json``/``junit.xml`` into
   ``.clusterforge/<stack>/reports/<node>/``. Then every figure is judged against the fleet
   (fleet_stage.py: this command's nodes of the same type, else the stored baseline, else the
   floor); a figure too far under its reference fails the node with the evidence.
3. Network check: first every node that passed must answer the controller (liveness.py: its
   Slurm state, then a one-task probe job on it alone); one that does not fails alone with that
   reason. Then a Slurm job across the rest (network.py), with a deadline on its whole life. A
   lone node is paired with an already certified node as the reference, or judged alone.
4. Verdict: pass -> leaves the hold (``idle``); fail -> DRAIN ``clusterforge: <check>: <line>``.

A node already certified (journal) is not certified again unless asked (``--recertify``, or
`certify` on demand).
"""

from __future__ import annotations

import json
from collections import defaultdict

from clusterforge.ansible.runner import PlaybookRun, run_stamp
from clusterforge.certify import liveness
from clusterforge.certify.admission import Admission, AdmissionError
from clusterforge.certify.fleet import FleetJudgement
from clusterforge.certify.network import NetworkJob, run_network_check
from clusterforge.certify.node_config import dumps, profile_for, render_node_config
from clusterforge.certify.reports import Verdict, merge, read_verdict, stamp_run
from clusterforge.journal import now_iso, write_atomic
from clusterforge.pipeline import fleet_stage
from clusterforge.pipeline.context import NODE_VALIDATORS, StackContext
from clusterforge.pipeline.scheduler import BaseStage, StageResult
from clusterforge.providers.base import Node

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
        """Judge this batch's figures against the fleet (clusterforge/certify/fleet.py)."""
        for n in todo:
            self.ctx.board.note(n.name, "judging figures against the fleet")
        return fleet_stage.judge(self._fleet_ctx, {n.name: n.instance_type for n in todo}, run_id)

    def _network(
        self, todo: list[Node], verdicts: dict[str, Verdict], run_id: str, admission: Admission, head: Node
    ) -> dict[str, Verdict]:
        ctx = self.ctx
        shared = ctx.spec.storage.shared_path
        group = [n for n in todo if verdicts[n.name].passed]
        if not shared or not group:
            return verdicts
        out = dict(verdicts)
        # A node that does not answer the controller fails alone, before any multi-node job.
        silent = self._unresponsive([n.name for n in group], run_id, admission, head)
        for name, why in silent.items():
            out[name] = merge(out[name], Verdict(name, False, [(liveness.CHECK_ID, why)]))
        group = [n for n in group if n.name not in silent]
        if not group:
            return out
        reference: Node | None = None
        if len(group) == 1:
            reference = self._reference_peer({n.name for n in todo}, admission)
            if reference is None:
                ctx.board.note(group[0].name, "no peer: network check runs on this node alone")
                return out
            try:
                admission.hold([reference.name])
            except AdmissionError as exc:
                ctx.board.note(
                    group[0].name, f"reference peer {reference.name} not held ({exc}): checked alone"
                )
                return out
            if self._unresponsive([reference.name], run_id, admission, head):
                admission.release(reference.name)
                ctx.board.note(group[0].name, f"reference peer {reference.name} not answering: checked alone")
                return out
        members = group + ([reference] if reference else [])
        configs = {}
        for n in members:
            peers = [p for p in members if p.name != n.name]
            configs[n.name] = render_node_config(ctx.spec, n, peers)
            write_atomic(
                ctx.paths.run / "node-config" / n.name / "NODE-network.json", json.dumps(configs[n.name])
            )
            ctx.board.note(n.name, f"network check across {len(members)} nodes (Slurm job)")
        suite = self._suite(group[0])[1]
        job = NetworkJob(run_id, shared, suite, admission.reservation, NODE_VALIDATORS)
        head_run = ctx.runner(head, timeout_s=job.deadline_s + 60)
        net = run_network_check(head_run, job, configs, ctx.paths.reports)
        if reference is not None:
            admission.release(reference.name)
        for n in group:
            out[n.name] = merge(out[n.name], net[n.name])
        return out

    def _unresponsive(
        self, names: list[str], run_id: str, admission: Admission, head: Node
    ) -> dict[str, str]:
        """Nodes (of ``names``) that cannot take a Slurm job now, with the reason."""
        for name in names:
            self.ctx.board.note(name, "checking that slurmd answers the controller")
        try:
            states = admission.nodes()
        except AdmissionError as exc:
            return {n: f"cannot read Slurm's node states: {exc}" for n in names}
        head_run = self.ctx.runner(head, timeout_s=liveness.PROBE_TIMEOUT_S + 60)
        return liveness.unresponsive(
            head_run, states, names, admission.reservation, f"clusterforge-probe-{run_id}"
        )

    def _reference_peer(self, exclude: set[str], admission: Admission) -> Node | None:
        states = admission.nodes()
        for n in self.ctx.compute():
            if n.name in exclude or not self.ctx.journal.is_done(n.name, "certified"):
                continue
            if n.name in states and states[n.name].serving and states[n.name].state == "idle":
                return n
        return None

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
        return StageResult(False, reason)

    def _failed(self, name: str, check: str, line: str) -> StageResult:
        reason = f"clusterforge: {check}: {line}"
        self.ctx.journal.mark_failed(
            name, "certified", reason, verdict="fail", certified_at=now_iso(), certifying=""
        )
        return StageResult(False, reason)
