"""The certify stage: hold -> single-node checks -> network check -> release or drain.

1. Every node of the batch must be registered with Slurm; it is then held (maintenance
   reservation, clusterforge/slurm/admission.py) so no user work lands on it while it is judged.
2. Single-node checks: ``playbooks/certify.yml`` (Ansible) puts the node's NODE.json in place,
   runs the validators profile and fetches ``report.json``/``junit.xml`` into
   ``.clusterforge/<stack>/reports/<node>/``. Then every figure is judged against the fleet
   (fleet_stage.py: this command's nodes of the same type, else the stored baseline, else the
   floor); a figure too far under its reference fails the node with the evidence.
3. Network check (certify/network/runner.py): every node that passed must answer the controller
   (clusterforge/slurm/liveness.py: its Slurm state, then a one-task probe job on it alone); one that does not fails
   alone with that reason. Then rounds of pair tests planned by certify/network/planner.py and run as
   concurrent Slurm jobs in the hold, each with a deadline: a verdict per node and per link. A
   small batch borrows certified idle nodes as known-good partners.
4. Verdict: pass -> leaves the hold (``idle``); fail -> DRAIN ``clusterforge: <check>: <line>``,
   whatever failed it: a check, the fleet, the network, or slurmd never registering or answering.
   Both are batched: one release and one drain step for the whole batch (clusterforge/slurm/admission.py). A drain
   the controller refused is said in the node's result and kept in the journal (section
   ``pending_drains``); every run drains those first.

A controller fault is not a node fault: when no Slurm controller answers (``scontrol ping``), a
step waits for it (``CLUSTERFORGE_CONTROLLER_WAIT_S``, default 180 s) and runs again; when it stays
away the command stops with a reason naming the controller, no node is failed or drained for it,
and the nodes stay held with their certification marked cut short, so the next run certifies
them again.

A node already certified (journal) is not certified again unless asked (``--recertify``, or
`certify` on demand).
"""

from __future__ import annotations

import functools
import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import TypeVar

from clusterforge.ansible.runner import PlaybookRun, run_stamp
from clusterforge.certify.fleet.judge import FleetJudgement
from clusterforge.health.record import record_failure
from clusterforge.journal import now_iso, write_atomic
from clusterforge.node.config import dumps, profile_for, render_node_config
from clusterforge.node.report_model import NodeReport
from clusterforge.node.reports import Verdict, merge, read_report
from clusterforge.pipeline import fleet_stage
from clusterforge.pipeline.context import StackContext
from clusterforge.pipeline.network_stage import NetworkStep
from clusterforge.pipeline.scheduler import BaseStage, StageResult
from clusterforge.providers.base import Node
from clusterforge.slurm import liveness
from clusterforge.slurm.admission import Admission, AdmissionError, ControllerError, failure_reason

REGISTER_TIMEOUT_S = 90.0
# How long a certification waits for a Slurm controller that stopped answering before it stops
# (nodes held, nothing failed for it): a controller restart takes seconds, a failover a minute.
CONTROLLER_WAIT_S = 180.0
CONTROLLER_WAIT_ENV = "CLUSTERFORGE_CONTROLLER_WAIT_S"
CONTROLLER_POLL_S = 5.0
# Journal section: node -> drain reason, for failures whose drain did not reach Slurm yet.
PENDING_DRAINS = "pending_drains"
T = TypeVar("T")


def keep_drains(ctx: StackContext, pending: dict[str, str], settled: set[str]) -> None:
    """Record drains that did not reach Slurm (``pending``) and forget those that did (``settled``)."""
    journal = ctx.journal
    with ctx.lock:
        kept = dict(journal.section(PENDING_DRAINS) or {})
        changed = {**{n: r for n, r in kept.items() if n not in settled}, **pending}
        if changed != kept:
            journal.set_section(PENDING_DRAINS, changed)


def drain_earlier_failures(ctx: StackContext, failures: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Compute nodes the pipeline failed before certifying them (node -> (stage, why): provision,
    configure): drained with ``clusterforge: <stage>: <why>`` so Slurm says why they are out. Nodes the controller does not
    know (not in slurm.conf yet) have nothing to drain. Returns node -> why its drain did not land
    (kept for the next run as the certify stage's are)."""
    heads = ctx.heads()
    if not failures or not heads:
        return {}
    reasons = {n: failure_reason(stage, why) for n, (stage, why) in failures.items()}
    try:
        outcome = Admission(ctx.runner(heads[0])).fail_many(reasons)
    except AdmissionError as exc:  # the controller away (or not set up): said, and tried again next run
        keep_drains(ctx, reasons, set())
        return dict.fromkeys(reasons, str(exc))
    refused = {
        n: why
        for n, why in outcome.refused.items()
        if not why.startswith("not known to the Slurm controller")
    }
    keep_drains(ctx, {n: reasons[n] for n in refused}, set(outcome.drained))
    return refused


def controller_wait_s() -> float:
    raw = os.environ.get(CONTROLLER_WAIT_ENV, "")
    try:
        return max(0.0, float(raw)) if raw else CONTROLLER_WAIT_S
    except ValueError:
        return CONTROLLER_WAIT_S


class CertifyStage(BaseStage):
    name = "certify"

    def __init__(self, ctx: StackContext, playbook: str = "certify.yml"):
        self.ctx = ctx
        self.playbook = ctx.playbooks / playbook
        self._run: PlaybookRun | None = None
        self._runs: dict[str, str] = {}  # node -> run id, over every batch of this command
        self._fleet_ctx = fleet_stage.FleetContext.for_stack(ctx.spec, ctx.options.profile, ctx.paths.reports)
        self._sleep: Callable[[float], None] = time.sleep

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
        heads = ctx.heads()
        if not heads:
            for n in todo:
                results[n.name] = self._failed(
                    n.name, "certify", "no head node: nothing to admit the node to"
                )
            return results
        admission = Admission(ctx.runner(heads[0]))
        names = [n.name for n in todo]
        try:
            # Drains an earlier run could not land (the controller refused or was away): again now.
            self._slurm(
                names, "draining nodes failed earlier", lambda: self._retry_drains(admission, set(names))
            )
        except AdmissionError as exc:
            for name in names:
                ctx.board.note(name, f"earlier failures not drained yet: {exc}")
        if not todo:
            return results
        run_id = run_stamp()
        for n in todo:
            earlier = ctx.journal.record(n.name).certifying
            if earlier:
                ctx.board.note(n.name, f"certification in run {earlier} was cut short: certifying again")
            ctx.journal.annotate(n.name, certifying=run_id)
        verdicts: dict[str, Verdict] = {}
        try:
            self._certify(todo, verdicts, admission, heads[0], run_id, results)
        except ControllerError as exc:
            results.update(self._controller_stop([n for n in todo if n.name not in results], verdicts, exc))
        self._html(sorted(self._runs))
        return results

    def _certify(
        self,
        todo: list[Node],
        verdicts: dict[str, Verdict],
        admission: Admission,
        head: Node,
        run_id: str,
        results: dict[str, StageResult],
    ) -> None:
        """Hold, checks, network, verdicts; fills ``verdicts`` as they are known and ``results``
        as nodes are decided (so a controller lost half-way knows what is left)."""
        ctx = self.ctx
        names = [n.name for n in todo]
        ctx.board.note_many(names, "waiting for slurmd to register")
        missing = set(
            self._slurm(
                names,
                "waiting for slurmd to register",
                lambda: admission.wait_registered(names, timeout_s=REGISTER_TIMEOUT_S),
            )
        )
        for name in sorted(missing):
            verdicts[name] = Verdict(
                name, False, [("slurm-registration", "slurmd never registered with the controller")]
            )
        held = [n for n in todo if n.name not in missing]
        try:
            self._slurm(names, "holding the nodes", lambda: admission.hold([n.name for n in held]))
        except ControllerError:
            raise
        except AdmissionError as exc:
            for n in held:
                verdicts[n.name] = Verdict(n.name, False, [("slurm-hold", str(exc))])
            held = []
        judgement = None
        if held:
            reports: dict[str, NodeReport] = {}
            single = self._single_node(held, run_id, reports)
            judgement = self._fleet(held, reports)
            # Each fetched report read once (above) and written once: stamped with the run, and
            # with the fleet's verdicts when it was judged.
            for name, report in reports.items():
                report.write(ctx.paths.reports / name / "report.json")
            single = fleet_stage.apply(judgement, single, ctx.board.note, self._fleet_ctx.error)
            verdicts.update(single)
            verdicts.update(self._network(held, verdicts, run_id, admission, head))
        for n in todo:
            self._runs[n.name] = run_id
        self._decide(todo, verdicts, admission, run_id, results)
        # Cloud providers keep the verdict on the machine too (AWS: the clusterforge:certification tag).
        tag = getattr(ctx.provider, "record_certification", None)
        if callable(tag):
            try:
                tag(ctx.spec, {n.name: results[n.name].ok for n in todo if n.name in results}, todo)
            except Exception as exc:  # noqa: BLE001 - a tag that could not be written is said, never fatal
                ctx.board.note(ctx.spec.stack, f"certification tags not written: {type(exc).__name__}: {exc}")
        fleet_stage.record(
            self._fleet_ctx, judgement, {n.name: verdicts[n.name].passed for n in held}, run_id
        )

    def _slurm(self, names: list[str], what: str, step: Callable[[], T]) -> T:
        """Run a Slurm step; while no controller answers, wait for one (``controller_wait_s``) and
        run the step again. Raises ControllerError when it stays away: never a node's failure."""
        deadline = time.monotonic() + controller_wait_s()
        while True:
            try:
                return step()
            except ControllerError as exc:
                if time.monotonic() >= deadline:
                    raise
                self.ctx.board.note_many(names, f"{what}: waiting for the Slurm controller ({exc})")
                self._sleep(CONTROLLER_POLL_S)

    def _html(self, nodes: list[str]) -> None:
        """The people's report (reports/report.html) of this command's nodes, each from its own
        run's reports only; it never changes a verdict."""
        ctx = self.ctx
        try:
            from clusterforge.health.head_state import with_head_strikes
            from clusterforge.health.history import node_history
            from clusterforge.reports import write_run_html

            heads = ctx.heads()  # the head's loop records strikes the workstation's journal has not seen
            live = {h.name: h for h in heads}
            sections = with_head_strikes(ctx.spec, ctx.journal.sections, live, list(live), ctx.runner)
            history = node_history(ctx.spec, ctx.journal.nodes, sections, time.time())
            write_run_html(
                ctx.paths.reports,
                ctx.paths.reports / "report.html",
                stack=ctx.spec.stack,
                nodes=nodes,
                run_ids=dict(self._runs),
                history=history,
            )
        except (OSError, ImportError, ValueError) as exc:
            for name in nodes:
                ctx.board.note(name, f"HTML report not written: {exc}")

    # -- steps -------------------------------------------------------------------------------

    def _suite(self, node: Node) -> tuple[str, str]:
        name, prof = profile_for(self.ctx.spec, node.pool, self.ctx.options.profile)
        return name, prof.suite

    def _single_node(
        self, todo: list[Node], run_id: str, reports: dict[str, NodeReport]
    ) -> dict[str, Verdict]:
        """Run the checks; the verdicts, and ``reports`` filled with each readable fetched
        report, stamped with ``run_id`` (written by the caller)."""
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
                    report, verdicts[n.name] = read_report(n.name, ctx.paths.reports / n.name / "report.json")
                    if report is not None:
                        report.run_id = run_id
                        reports[n.name] = report
        return verdicts

    def _fleet(self, todo: list[Node], reports: dict[str, NodeReport]) -> FleetJudgement | None:
        """Judge this batch's figures against the fleet (clusterforge/certify/fleet/judge.py)."""
        for n in todo:
            self.ctx.board.note(n.name, "judging figures against the fleet")
        return fleet_stage.judge(self._fleet_ctx, {n.name: n.instance_type for n in todo}, reports)

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
        names = [n.name for n in group]
        # A node that does not answer the controller fails alone, before any multi-node job.
        silent = self._slurm(names, "checking that slurmd answers", lambda: step.unresponsive(names))
        for name, why in silent.items():
            out[name] = merge(out[name], Verdict(name, False, [(liveness.CHECK_ID, why)]))
        by_type: dict[str, list[Node]] = defaultdict(list)
        for n in group:
            if n.name not in silent:
                by_type[n.instance_type].append(n)
        for nodes in by_type.values():
            net = self._slurm(
                [n.name for n in nodes],
                "network group tests",
                functools.partial(step.run, nodes, {n.name for n in todo}),
            )
            for n in nodes:
                out[n.name] = merge(out[n.name], net.verdicts[n.name])
                if net.verdicts[n.name].note:
                    ctx.board.note(n.name, f"network: {net.verdicts[n.name].note}")
        return out

    def _decide(
        self,
        todo: list[Node],
        verdicts: dict[str, Verdict],
        admission: Admission,
        run_id: str,
        results: dict[str, StageResult],
    ) -> None:
        """Every verdict to Slurm, batched: the passed nodes leave the hold in one step, the failed
        ones are drained with their reasons in another. A drain the controller refused is said in
        the node's result and kept for the next run to retry."""
        ctx = self.ctx
        passed = [n.name for n in todo if verdicts[n.name].passed]
        reasons = {
            n.name: failure_reason(*verdicts[n.name].first_failure)
            for n in todo
            if not verdicts[n.name].passed
        }
        try:
            self._slurm(passed, "admitting the certified nodes", lambda: admission.release(passed))
        except ControllerError:
            raise
        except AdmissionError as exc:
            reasons.update({name: failure_reason("slurm-release", str(exc)) for name in passed})
            passed = []
        for name in passed:
            ctx.journal.mark_done(
                name,
                "certified",
                verdict="pass",
                certified_at=now_iso(),
                profile=self._suite(ctx.nodes[name])[0],
                report=str(ctx.paths.reports / name / "report.json"),
                run_id=run_id,
                certifying="",
            )
            results[name] = StageResult(True, "certified and admitted")
        refused = self._drain(admission, reasons)
        for name, reason in reasons.items():
            self._record_failure(name, reason, run_id)
            note = f" (not drained: {refused[name]}; the next run drains it)" if name in refused else ""
            results[name] = StageResult(False, reason + note)

    def _record_failure(self, name: str, reason: str, run_id: str = "") -> None:
        extra = {"run_id": run_id} if run_id else {}
        self.ctx.journal.mark_failed(
            name,
            "certified",
            reason,
            verdict="fail",
            certified_at=now_iso(),
            profile=self._suite(self.ctx.nodes[name])[0],
            report=str(self.ctx.paths.reports / name / "report.json"),
            certifying="",
            **extra,
        )
        # A strike on its hardware (clusterforge.health): the verdict alone is overwritten by the next pass.
        check = (
            reason.split(": ", 2)[1]
            if reason.startswith("clusterforge: ") and reason.count(": ") >= 2
            else ""
        )
        record_failure(self.ctx.journal, name, reason, check)

    def _drain(self, admission: Admission, reasons: dict[str, str]) -> dict[str, str]:
        """Drain the failed nodes (waiting for the controller when it is away); node -> why a drain
        did not land. Those are kept in the journal (``PENDING_DRAINS``) for the next run."""
        if not reasons:
            return {}
        try:
            outcome = self._slurm(
                list(reasons), "draining the failed nodes", lambda: admission.fail_many(reasons)
            )
            refused = outcome.refused
        except ControllerError:
            self._keep_drains(reasons)
            raise
        except AdmissionError as exc:
            refused = dict.fromkeys(reasons, str(exc))
        self._keep_drains({n: reasons[n] for n in refused}, settled=set(reasons) - set(refused))
        return refused

    def _keep_drains(self, pending: dict[str, str], settled: set[str] | None = None) -> None:
        keep_drains(self.ctx, pending, settled or set())

    def _retry_drains(self, admission: Admission, certifying: set[str]) -> None:
        """Drains an earlier run could not land; a node certified again now gets its new verdict instead."""
        kept = dict(self.ctx.journal.section(PENDING_DRAINS) or {})
        if not kept:
            return
        retry = {n: r for n, r in kept.items() if n not in certifying}
        outcome = admission.fail_many(retry)
        for name, reason in outcome.drained.items():
            self.ctx.board.note(name, f"drained now (an earlier run could not): {reason}")
        self._keep_drains({n: kept[n] for n in outcome.refused}, settled=set(kept) - set(outcome.refused))

    def _controller_stop(
        self, nodes: list[Node], verdicts: dict[str, Verdict], exc: ControllerError
    ) -> dict[str, StageResult]:
        """The controller stayed away: no node fails for it. A node already judged failed keeps
        its verdict (drained by the next run); every other node stays held, its certification
        left marked as cut short, so the next run certifies it again."""
        out: dict[str, StageResult] = {}
        failed = {n.name: failure_reason(*verdicts[n.name].first_failure) for n in nodes
                  if n.name in verdicts and not verdicts[n.name].passed}  # fmt: skip
        self._keep_drains(failed)
        why = f"stopped: {exc}"
        for n in nodes:
            if n.name in failed:
                self._record_failure(n.name, failed[n.name])
                out[n.name] = StageResult(
                    False, f"{failed[n.name]} (not drained yet: {why}; the next run drains it)"
                )
            else:
                out[n.name] = StageResult(
                    False, f"not certified, {why}; the node stays held and the next run certifies it again"
                )
        return out

    def _failed(self, name: str, check: str, line: str) -> StageResult:
        """A failure that cannot reach Slurm (no head node to ask)."""
        reason = f"clusterforge: {check}: {line}"
        self.ctx.journal.mark_failed(
            name, "certified", reason, verdict="fail", certified_at=now_iso(), certifying=""
        )
        return StageResult(False, reason)
