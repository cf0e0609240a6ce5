"""One round of the health loop on the head node (the runner: every Slurm command and journal write).

Idempotent and resumable: every decision is recomputed from the journal and Slurm at the start of a
round, every job is named after its node (adopted, never submitted twice), a strike is written with
the time its job finished (written twice, it is the same strike), and a controller that stops
answering pauses the round with nothing drained for it. See the package docstring for the steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from clusterforge.certify.fleet.baseline import BaselineStore
from clusterforge.health.live import passive_check, passive_reason
from clusterforge.health.loop.config import LoopConfig
from clusterforge.health.loop.inputs import loop_inputs
from clusterforge.health.loop.judge import Outcome, read_outcomes
from clusterforge.health.loop.slurm import (
    HealthJob,
    Kind,
    job_dir,
    job_script,
    parse_sbatch,
    parse_squeue,
    parse_tag,
    sbatch_argv,
    scancel_argv,
    squeue_argv,
)
from clusterforge.health.loop.steplog import LOG_FILE, StepLog
from clusterforge.health.plan import HealthPlan, health_plan
from clusterforge.health.record import record_failure
from clusterforge.health.state import HEALTH_STRIKES, epoch
from clusterforge.journal import Journal
from clusterforge.slurm.admission import Admission, AdmissionError, ControllerError, Runner
from clusterforge.slurm.parse import SinfoNode

REPLACE_REQUESTED = "replace_requested"  # node -> {at, identity, strikes, why}: the workstation replaces
RMA_FLAGGED = "rma_flagged"  # node -> {at, identity, strikes, why}


@dataclass
class RoundResult:
    paused: str = ""  # why the round paused ("" when it ran)
    adopted: list[str] = field(default_factory=list)
    submitted: list[str] = field(default_factory=list)
    preempted: list[str] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    drained: dict[str, str] = field(default_factory=dict)
    recertifying: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    replace_requested: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    plan: HealthPlan | None = None
    sinfo: dict[str, SinfoNode] = field(default_factory=dict)

    def summary(self) -> str:
        if self.paused:
            return f"paused: {self.paused}"
        parts = [
            f"{len(v)} {k}"
            for k, v in (
                ("submitted", self.submitted), ("adopted", self.adopted), ("preempted", self.preempted),
                ("passed", self.passed), ("failed", self.failed), ("drained", self.drained),
                ("recertifying", self.recertifying), ("returned", self.returned),
                ("replace requested", self.replace_requested), ("flagged for RMA", self.flagged),
                ("cancelled", self.cancelled),
            )
            if v
        ]  # fmt: skip
        return ", ".join(parts) or "nothing to do"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=0).isoformat()


class Round:
    """One round; ``run`` executes argv on the head node: ``(argv, stdin=None) -> (rc, out, err)``."""

    def __init__(
        self,
        config: LoopConfig,
        run: Runner,
        journal: Journal,
        now: Callable[[], float] = time.time,
        store: BaselineStore | None = None,
    ) -> None:
        self.config = config
        self.run = run
        self.journal = journal
        self.now = now
        self.adm = Admission(run, reservation=config.reservation)
        self.store = store if store is not None else BaselineStore(config.stack, root=config.state_dir)
        self.result = RoundResult()
        self.steps = StepLog(config.stack_dir / LOG_FILE)

    # -- journal ---------------------------------------------------------------------------

    def log(self, step: str, node: str = "", **detail: Any) -> None:
        self.steps.write({"at": _iso(self.now()), "step": step, **({"node": node} if node else {}), **detail})

    # -- Slurm -----------------------------------------------------------------------------

    def _call(self, argv: list[str], what: str) -> str:
        rc, out, err = self.run(argv)
        if rc == 0:
            return out
        down = self.adm.controller_problem()
        if down:
            raise ControllerError(f"{what}: {down}")
        raise AdmissionError(f"{what}: `{' '.join(argv[:3])} ...` exited {rc}: {(err or out).strip()[:200]}")

    def _jobs(self) -> dict[str, HealthJob]:
        return parse_squeue(self._call(squeue_argv(self.config.partition), "listing the health jobs"))

    def _submit(self, kind: Kind, node: str, suite: str) -> str:
        cfg = self.config
        script = job_script(
            cfg.validators, suite, cfg.node_config, cfg.reports_dir, node, lock=cfg.validators_lock
        )
        argv = sbatch_argv(
            kind,
            node,
            cfg.partition,
            script,
            cfg.time_limit_min,
            cfg.reservation if kind == "recertify" else "",
        )
        job_id = parse_sbatch(self._call(argv, f"{node}: submitting the {kind} check"))
        if not job_id:
            raise AdmissionError(f"{node}: sbatch printed no job id")
        self.journal.annotate(node, certifying=f"{kind}:{job_id}")
        self.log("submitted", node, kind=kind, job=job_id, suite=suite)
        return job_id

    # -- the round -------------------------------------------------------------------------

    def execute(self) -> RoundResult:
        try:
            down = self.adm.controller_problem()
            if down:
                return self._pause(down)
            try:
                self._steps()
            except ControllerError as exc:
                return self._pause(f"the controller stopped answering mid-round ({exc})")
            self.log("round", summary=self.result.summary())
            return self.result
        finally:
            self.steps.close()

    def _pause(self, why: str) -> RoundResult:
        self.result.paused = why
        self.log("paused", why=why)
        return self.result

    def _observe(self) -> None:
        """Tie each node's record to its machine; a replaced machine starts with a fresh record."""
        for name, node in self.config.nodes.items():
            machine = node.identities[0] if node.identities else ""
            rec = self.journal.nodes.get(name)
            if machine and (rec is None or rec.provider_id != machine):
                self.journal.observe(name, machine)
                self.journal.record_certified(
                    name, {}, {"provider_id": machine, "gpus": list(node.identities[1:])}
                )

    def _steps(self) -> None:
        self._observe()
        sinfo = self.adm.nodes()
        jobs = {n: j for n, j in self._jobs().items() if n in self.config.nodes}
        self._adopt(jobs)
        # The loop's own results first: a node its check failed and the node's health check drained
        # too (each found the same fault) is one failure, one strike (_passive skips a failed node).
        if self._collect(jobs):
            sinfo = self.adm.nodes()
        self._passive(sinfo)
        now = self.now()
        inputs = loop_inputs(self.config, self.journal.nodes, self.journal.sections, sinfo, now)
        plan = health_plan(self.config.health, inputs, now)
        self.result.plan, self.result.sinfo = plan, sinfo
        self._act(plan, sinfo, jobs)
        self._cancel_stranded(sinfo, jobs)
        for node in plan.active:
            if node in jobs or self.journal.nodes[node].certifying:
                continue  # already queued (adopted): never twice
            try:
                self._submit("active", node, self.config.active_suite)
                self.result.submitted.append(node)
            except ControllerError:
                raise
            except AdmissionError as exc:
                self.result.notes.append(str(exc))
                self.log("submit-failed", node, why=str(exc))
        self.result.sinfo = self.adm.nodes()  # the states the round left behind (metrics)

    def _adopt(self, jobs: dict[str, HealthJob]) -> None:
        for node, job in jobs.items():
            if self.journal.nodes[node].certifying != job.tag:
                self.journal.annotate(node, certifying=job.tag)
                self.result.adopted.append(node)
                self.log("adopted", node, kind=job.kind, job=job.job_id)

    def _suite(self, kind: str, pool: str) -> str:
        if kind == "active":
            return self.config.active_suite
        return self.config.health.remediation_for(pool).recertify_suite

    def _collect(self, jobs: dict[str, HealthJob]) -> bool:
        """Read and judge the loop's jobs that left the queue; True when a node was drained."""
        finished: dict[str, Any] = {}
        kinds: dict[str, str] = {}
        for name, rec in self.journal.nodes.items():
            kind, job_id = parse_tag(rec.certifying)
            if name not in self.config.nodes or not kind:
                continue
            running = jobs.get(name)
            if running is not None and running.job_id == job_id:
                continue
            finished[name] = job_dir(self.config.reports_dir, name, job_id)
            kinds[name] = kind
        if not finished:
            return False
        types = {n: self.config.nodes[n].instance_type for n in finished}
        outcomes = read_outcomes(finished, types, self.store, self.config.fleet)
        refail: dict[str, str] = {}
        for node, out in sorted(outcomes.items()):
            kind = kinds[node]
            suite = self._suite(kind, self.config.nodes[node].pool)
            if out.result == "interrupted":
                self.journal.annotate(node, certifying="")
                self.result.preempted.append(node)
                self.log("preempted" if kind == "active" else "interrupted", node, kind=kind, why=out.reason)
            elif out.result == "pass":
                self.journal.annotate(
                    node, verdict="pass", certified_at=out.at, profile=suite, reason="", certifying=""
                )
                self.result.passed.append(node)
                self.log(
                    "passed", node, kind=kind, suite=suite, **({"note": out.reason} if out.reason else {})
                )
            else:
                self._fail(node, out, kind, suite)
                if kind == "recertify":
                    refail[node] = out.reason
        if refail:  # drained again with the new reason, and out of the loop's reservation
            outcome = self.adm.fail_many(refail)
            for node, reason in outcome.drained.items():
                self.result.drained[node] = reason
                self.log("drained", node, reason=reason)
            for node, why in outcome.refused.items():
                self.log("drain-refused", node, why=why)
        return bool(refail)

    def _fail(self, node: str, out: Outcome, kind: str, suite: str) -> None:
        """A strike (once, whatever the retries) and the failed verdict."""
        strikes = self.journal.sections.get(HEALTH_STRIKES) or []
        if not any(
            s.get("node") == node and s.get("at") == out.at and s.get("reason") == out.reason for s in strikes
        ):
            record_failure(self.journal, node, out.reason, out.check, at=out.at)
        self.journal.mark_failed(
            node,
            f"health-{kind}",
            out.reason,
            verdict="fail",
            certified_at=out.at,
            profile=suite,
            certifying="",
        )
        self.result.failed[node] = out.reason
        self.log("failed", node, kind=kind, reason=out.reason)

    def _passive(self, sinfo: dict[str, SinfoNode]) -> None:
        """A drain by the node's passive check is a failure of the loop's record, counted once: a node
        already failed (since its last pass) is the same incident, not a second strike."""
        for node, sn in sinfo.items():
            if node not in self.config.nodes or not (sn.drained and passive_reason(sn.reason)):
                continue
            rec = self.journal.nodes[node]
            if rec.verdict == "fail":
                continue
            check = passive_check(sn.reason)
            self._fail(node, Outcome(node, "fail", _iso(self.now()), sn.reason, check), "passive", "")

    def _ours(self, node: str, sn: SinfoNode | None, held: set[str]) -> bool:
        """Out of service by the loop's own doing: in its reservation, or drained with the reason of the
        node's last failure (Slurm may cut a long reason) or the passive check's. A person's drain, or a
        rollout's ``clusterforge: upgrading``, is never lifted nor taken for a re-certification."""
        if node in held:
            return True
        if sn is None or not sn.drained:
            return False
        if passive_reason(sn.reason):
            return True
        last = self.journal.nodes[node].reason
        strikes = [s for s in self.journal.sections.get(HEALTH_STRIKES) or [] if s.get("node") == node]
        reasons = {last, *(str(s.get("reason") or "") for s in strikes[-3:])} - {""}
        return any(sn.reason[:60] == r[:60] for r in reasons)

    def _act(self, plan: HealthPlan, sinfo: dict[str, SinfoNode], jobs: dict[str, HealthJob]) -> None:
        drain: dict[str, str] = {}
        hold: list[str] = []
        release: list[str] = []
        now = self.now()
        held: set[str] = set()
        if any(d.action in ("recertify", "return") for d in plan.decisions):
            res = self.adm.reservations().get(self.config.reservation)
            held = set(res.nodes) if res else set()
        for d in plan.decisions:
            sn = sinfo.get(d.node)
            rec = self.journal.nodes[d.node]
            if d.action in ("recertify", "return") and not self._ours(d.node, sn, held):
                continue
            if d.action == "drain":
                drain[d.node] = rec.reason
            elif d.action in ("replace", "flag-rma"):
                if sn is not None and not sn.drained:  # a lemon never stays in service
                    lemon = plan.lemons[d.node]
                    drain[d.node] = (
                        f"clusterforge: health: lemon, {lemon.strikes} strikes in "
                        f"{self.config.health.strikes.window}: {rec.reason.removeprefix('clusterforge: ')}"
                    )[:200]
                self._lemon(d.node, d.action, d.why, plan)
            elif d.action == "recertify":
                last_fail = epoch(rec.certified_at) or 0.0
                if d.node in jobs:
                    continue
                retry_s = self.config.health.remediation_for(self.config.nodes[d.node].pool).recertify_retry_s
                if rec.failed_stage == "health-recertify" and now - last_fail < retry_s:
                    continue  # a failed re-certification is tried again later, not every round
                if sn is None or not sn.responding:
                    self.result.waiting.append(d.node)
                elif sn.state == "drained" or sn.in_maintenance:
                    hold.append(d.node)
                else:  # draining: its jobs finish first
                    self.result.waiting.append(d.node)
            elif d.action == "return" and d.node in held:  # re-certified in the loop's reservation
                release.append(d.node)
        if drain:
            outcome = self.adm.fail_many(drain)
            for node, reason in outcome.drained.items():
                self.result.drained[node] = reason
                self.log("drained", node, reason=reason)
            for node, why in outcome.refused.items():
                self.log("drain-refused", node, why=why)
        if hold:
            self.adm.hold(hold)
            for node in hold:
                suite = self._suite("recertify", self.config.nodes[node].pool)
                try:
                    self._submit("recertify", node, suite)
                    self.result.recertifying.append(node)
                except ControllerError:
                    raise
                except AdmissionError as exc:
                    self.result.notes.append(str(exc))
                    self.log("submit-failed", node, why=str(exc))
        if release:
            self.adm.release(release)
            for node in release:
                self.result.returned.append(node)
                self.log("returned", node, why="passed its re-certification")

    def _lemon(self, node: str, action: str, why: str, plan: HealthPlan) -> None:
        """Ask once per lemon identity: the hook (or the flag the workstation reads), or flag for RMA."""
        lemon = plan.lemons[node]
        section = REPLACE_REQUESTED if action == "replace" else RMA_FLAGGED
        asked = self.journal.sections.get(section) or {}
        if isinstance(asked.get(node), dict) and asked[node].get("identity") == lemon.identity:
            return
        entry: dict[str, Any] = {
            "at": _iso(self.now()), "identity": lemon.identity, "strikes": lemon.strikes, "why": why,
        }  # fmt: skip
        if action == "replace" and self.config.replace_hook:
            rc, out, err = self.run([*self.config.replace_hook, node])
            entry["hook"] = {"rc": rc, "said": (err or out).strip()[-200:]}
        self.journal.set_section(section, {**asked, node: entry})
        if action == "replace":
            self.result.replace_requested.append(node)
            self.log("replace-requested", node, **entry)
        else:
            self.result.flagged.append(node)
            self.log("flagged-rma", node, **entry)

    def _cancel_stranded(self, sinfo: dict[str, SinfoNode], jobs: dict[str, HealthJob]) -> None:
        """An active check still pending on a node taken out of service would wait forever: cancel it."""
        stranded = [
            j for n, j in jobs.items()
            if j.kind == "active" and j.state == "PENDING" and (sn := sinfo.get(n)) is not None and not sn.serving
        ]  # fmt: skip
        if not stranded:
            return
        self._call(scancel_argv([j.job_id for j in stranded]), "cancelling stranded checks")
        for j in stranded:
            self.journal.annotate(j.node, certifying="")
            self.result.cancelled.append(j.node)
            self.log("cancelled", j.node, job=j.job_id, why="its node left service before the check started")


def run_round(
    config: LoopConfig,
    run: Runner,
    journal: Journal,
    now: Callable[[], float] = time.time,
    store: BaselineStore | None = None,
) -> RoundResult:
    return Round(config, run, journal, now, store).execute()


def replace_requests(journal: Journal) -> dict[str, Any]:
    """What the workstation reads: node -> {at, identity, strikes, why[, hook]} the loop asked to replace."""
    value = journal.section(REPLACE_REQUESTED)
    return value if isinstance(value, dict) else {}
