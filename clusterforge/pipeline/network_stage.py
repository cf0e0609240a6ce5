"""The certify stage's network step: which node or link slows the fabric, as group tests.

1. Every node that passed its single-node checks must answer the Slurm controller
   (clusterforge/slurm/liveness.py); one that does not fails alone, before any multi-node job.
2. The planner (certify/network/planner.py) plans rounds of pair tests; the runner
   (certify/network/runner.py) runs each round's jobs concurrently in the hold. Up to two nodes
   certified earlier and idle are lent as known-good partners when the batch is small.
3. Each node gets the planner's verdict: pass, node fault, dead, flaky, or one end of a link
   fault (both nodes drained, the reason naming the link, unless the profile says to report
   links only). A node the planner could not resolve (too few figures and no baseline to judge
   against) is judged by its group tests' own floor checks, and the reason says so.
4. 2-node figures of nodes that passed enter the stored baseline (metric ``network.2node.busbw``;
   on GPU types with several collectives also ``network.2node.<collective>.busbw``), so the next
   run judges even two nodes against what the fabric did before.

What lands on disk: ``reports/<node>/network-report.json`` per node (its verdict, partners and
figures, stamped with the run id) and ``reports/network-groups.json`` (every group test).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterforge.catalog import load_hardware
from clusterforge.certify.fleet.baseline import Baseline, BaselineError, BaselineStore, Sample
from clusterforge.certify.fleet.rules import rules_for
from clusterforge.certify.network.collectives import CollectiveReferences, baseline_metric, collective_reason
from clusterforge.certify.network.planner import IsolationResult, IsolationRules, Planner
from clusterforge.certify.network.reasons import one_line
from clusterforge.certify.network.report import network_report
from clusterforge.certify.network.runner import (
    GroupJobs,
    NodeConfigs,
    RunLog,
    run_isolation,
    run_scaling,
    write_groups_file,
)
from clusterforge.journal import now_iso
from clusterforge.node.config import GPU_GROUP_LAUNCHER, profile_for, render_node_config
from clusterforge.node.report_model import utc_stamp
from clusterforge.node.reports import Verdict
from clusterforge.pipeline.context import NODE_VALIDATORS, StackContext
from clusterforge.providers.base import Node
from clusterforge.providers.local.share import compute_share_label
from clusterforge.slurm import liveness
from clusterforge.slurm.admission import Admission, AdmissionError, ControllerError

BASELINE_METRIC = baseline_metric(None)  # "network.2node.busbw": gloo, or nccl all_reduce
MAX_LENT = 2  # known-good partners lent to a small batch
SMALL_BATCH = 3


def group_node_config(spec: Any, node: Node, peers: list[Node], one_launcher: bool) -> dict[str, Any]:
    """NODE.json of a group test's member (the group runner sends it without peers: each job names
    its group's member list, ``validators run --peers-file``). nccl-multi-node refuses peers
    without nccl.launcher, so a GPU group (one launcher per job) gets the srun one; gloo ranks are
    started by the job itself."""
    return render_node_config(spec, node, peers, launcher=GPU_GROUP_LAUNCHER if one_launcher else ())


@dataclass(frozen=True)
class NetworkOutcome:
    verdicts: dict[str, Verdict]
    result: IsolationResult | None


def network_check_id(ctx: StackContext, node: Node) -> str:
    it = load_hardware().get(node.instance_type)
    return "nccl-multi-node" if it is not None and it.gpu is not None else "gloo-allreduce"


class NetworkStep:
    def __init__(self, ctx: StackContext, admission: Admission, head: Node, run_id: str, suite: str):
        self.ctx = ctx
        self.admission = admission
        self.head = head
        self.run_id = run_id
        self.suite = suite
        self.scaling = True  # measure busbw at larger group sizes once the pairs are judged
        self.attempts = 0

    def note(self, nodes: list[str], text: str) -> None:
        for name in nodes:
            self.ctx.board.note(name, text)

    def unresponsive(self, names: list[str]) -> dict[str, str]:
        """Nodes (of ``names``) that cannot take a Slurm job now, with the reason."""
        self.note(names, "checking that slurmd answers the controller")
        try:
            states = self.admission.nodes()
        except ControllerError:
            raise  # the controller's fault, not the nodes': the certify stage waits or stops
        except AdmissionError as exc:
            return {n: f"cannot read Slurm's node states: {exc}" for n in names}
        head_run = self.ctx.runner(self.head, timeout_s=liveness.PROBE_TIMEOUT_S + 60)
        return liveness.unresponsive(
            head_run, states, names, self.admission.reservation, f"clusterforge-probe-{self.run_id}"
        )

    def lend_partners(self, exclude: set[str], kind: str) -> list[Node]:
        """Certified, idle nodes of the same type, held for this check as known-good partners."""
        try:
            states = self.admission.nodes()
        except ControllerError:
            raise
        except AdmissionError:
            return []
        lent: list[Node] = []
        for n in self.ctx.compute():
            if len(lent) >= MAX_LENT:
                break
            if (
                n.name in exclude
                or n.instance_type != kind
                or not self.ctx.journal.is_done(n.name, "certified")
            ):
                continue
            state = states.get(n.name)
            if state is None or not state.serving or state.state != "idle":
                continue
            try:
                self.admission.hold([n.name])
            except ControllerError:
                raise
            except AdmissionError:
                continue
            if self.unresponsive([n.name]):
                self.admission.release(n.name)
                continue
            lent.append(n)
        return lent

    def run(self, group: list[Node], batch: set[str]) -> NetworkOutcome:
        """Verdicts for ``group`` (nodes of ``batch`` that passed everything so far and answer the
        controller). Nodes of the batch that failed earlier are never lent as partners."""
        ctx = self.ctx
        started = utc_stamp()
        kind = group[0].instance_type
        check = network_check_id(ctx, group[0])
        lent = self.lend_partners(batch, kind) if len(group) <= SMALL_BATCH else []
        nodes = {n.name: n for n in [*group, *lent]}
        if len(nodes) < 2:
            why = (
                f"the network cannot be certified with one {kind} node: it needs a partner (a second node "
                "of the type in this run, or one certified earlier and idle); single-node checks only"
            )
            return NetworkOutcome({n.name: Verdict(n.name, True, note=why) for n in group}, None)
        store = BaselineStore(ctx.spec.stack)
        collectives = self._collectives(group[0], check)
        baselines = self._baselines(store, kind, collectives or (None,))
        primary = baselines.get(collectives[0] if collectives else None)
        # The pair test's own gaps where the catalogue gives them (fleet metric network.2node.busbw).
        gaps = rules_for(load_hardware(), kind, BASELINE_METRIC)
        fail_gap = min(0.9, max(0.05, gaps.fail_gap_pct / 100))
        rules = IsolationRules(
            fail_gap=fail_gap,
            warn_gap=min(fail_gap * 0.99, max(0.01, gaps.warn_gap_pct / 100)),
            baseline={2: primary} if primary else {},
            check=check,
        )
        planner = Planner([n.name for n in group], rules=rules, known_good=[n.name for n in lent])
        it = load_hardware().get(kind)
        gpus = it.gpu_count if it is not None else 0
        # A step run again (the controller came back) gets folders and job names of its own.
        self.attempts += 1
        attempt_id = self.run_id if self.attempts == 1 else f"{self.run_id}.{self.attempts}"
        jobs = GroupJobs(
            attempt_id, ctx.spec.storage.shared_path or "", self.suite, self.admission.reservation,
            NODE_VALIDATORS, check, one_launcher=check != "gloo-allreduce", collectives=collectives,
            gpus_per_node=gpus, efa=it is not None and it.has_efa,
        )  # fmt: skip
        references = (
            CollectiveReferences(
                collectives,
                {(c, 2): v for c, v in baselines.items() if c},
                rules.fail_gap,
                rules.min_fleet_figures,
            )
            if len(collectives) > 1
            else None
        )
        head_run = ctx.runner(self.head, timeout_s=jobs.deadline_s + 120)
        configs = NodeConfigs(
            lambda name: group_node_config(ctx.spec, nodes[name], [], jobs.one_launcher),
            lambda name: nodes[name].address,
        )
        timing = {"controller": self.admission.check_controller}

        self.note(list(nodes), "network: group tests (Slurm jobs in the hold)")
        try:
            result, log = run_isolation(
                head_run,
                planner,
                jobs,
                configs,
                note=lambda text: self.note(list(nodes), text),
                references=references,
                **timing,
            )
            healthy = [n for n, v in result.node_verdicts.items() if v.ok] + [n.name for n in lent]
            if self.scaling and len(group) >= SMALL_BATCH:  # not for one or two nodes re-certified
                self.note(healthy, "network: scaling tests (busbw against group size, for the report)")
                run_scaling(head_run, jobs, healthy, configs, log, result.rounds + 1, **timing)
        finally:
            for n in lent:
                self.admission.release(n.name)
        write_groups_file(ctx.paths.reports, self.run_id, result, log)
        verdicts = {n.name: self._verdict(n.name, result, log, check, rules.fail_gap) for n in group}
        for name, verdict in verdicts.items():
            self._write_report(name, verdict, result, log, check, started)
        self._record(store, kind, result, log, verdicts, collectives)
        return NetworkOutcome(verdicts, result)

    def _collectives(self, node: Node, check: str) -> tuple[str, ...]:
        """nccl-multi-node's collectives, read from the NODE.json the group jobs get (so the runner
        judges what the nodes run)."""
        if check == "gloo-allreduce":
            return ()
        nccl = render_node_config(self.ctx.spec, node).get("nccl") or {}
        return tuple(nccl.get("multi_node_collectives") or ("all_reduce",))

    # -- judging ----------------------------------------------------------------------------

    def _verdict(
        self, name: str, result: IsolationResult, log: RunLog, check: str, fail_gap: float = 0.15
    ) -> Verdict:
        v = result.node_verdicts.get(name)
        if v is None:
            return Verdict(name, False, [(check, "the network planner gave no verdict for this node")])
        reason = v.reason.removeprefix(f"{check}: ")
        named = collective_reason(check, name, log.records, fail_gap) if log.collectives else None
        if named is not None and v.kind in ("node-fault", "flaky", "link-fault"):
            # Several collectives: say which one failed, with its own figures and reference.
            collective, line = named
            body = line.removeprefix(f"{check}: ")
            reason = one_line(
                body if v.kind == "node-fault" else f"{collective} under its reference; {reason}"
            )
        if v.kind == "pass":
            return Verdict(name, True, note=reason)
        if v.kind == "link-fault" and not self._drain_links(self.ctx.nodes[name]):
            return Verdict(
                name, True, note=f"{reason} (reported, not drained: the profile says links are reported)"
            )
        if v.kind == "undetermined" and 2 not in result.references:
            return self._by_floor(name, reason, log, check)
        # Undetermined with a reference to judge by (a retest or a partner still to come when the
        # rounds ran out): held, never admitted on a guess.
        return Verdict(name, False, [(check, reason)])

    def _by_floor(self, name: str, why: str, log: RunLog, check: str) -> Verdict:
        """No reference to judge against: the node's group tests' own floor checks decide."""
        reports = log.reports.get(name, [])
        own = [
            c for r in reports for c in r.get("checks") or [] if isinstance(c, dict) and c.get("id") == check
        ]
        bad = [c for c in own if c.get("status") in ("fail", "error")]
        if own and not bad:
            return Verdict(name, True, note=f"judged against the floor only: {why}")
        # No report at all: what the jobs' own output said (NCCL's error, Slurm's time limit).
        said = [r.state for r in log.records if name in r.nodes and r.state.startswith("no report: ")]
        detail = (
            bad[0].get("summary")
            if bad
            else "no group test of this node reported" + (f" ({said[-1]})" if said else "")
        )
        return Verdict(name, False, [(check, f"{detail}; {why}")])

    def _drain_links(self, node: Node) -> bool:
        """The profile's ``link_faults``: "drain" (default) or "report"."""
        _, profile = profile_for(self.ctx.spec, node.pool, self.ctx.options.profile)
        return getattr(profile, "link_faults", "drain") != "report"

    def _baselines(
        self, store: BaselineStore, kind: str, collectives: tuple[str | None, ...]
    ) -> dict[str | None, float]:
        """Stored 2-node figure per collective (None: the gloo path), those with one."""
        try:
            base = store.load(kind)
        except BaselineError as exc:
            self.note([n.name for n in self.ctx.compute()], f"network baseline not used: {exc}")
            return {}
        out: dict[str | None, float] = {}
        share = self._share(kind)
        for c in collectives:
            ref = base.reference(baseline_metric(c), None, share=share) if base else None
            if ref is not None and ref.other_share:
                # A pair of nodes with another share moves other figures: judged by this run's median.
                why = f"network baseline of another share not a reference ({ref.other_share})"
                self.note([n.name for n in self.ctx.compute() if n.instance_type == kind], why)
            elif ref is not None and ref.value > 0:
                out[c] = ref.value
        return out

    def _share(self, kind: str) -> str:
        """Container types: the share of the machine each node has (baselines keep it); else ""."""
        it = load_hardware().get(kind)
        return compute_share_label(self.ctx.spec) if it is not None and it.container else ""

    def _record(
        self,
        store: BaselineStore,
        kind: str,
        result: IsolationResult,
        log: RunLog,
        verdicts: dict[str, Verdict],
        collectives: tuple[str, ...] = (),
    ) -> None:
        good = {n for n, v in verdicts.items() if v.passed} | {
            n for n, v in result.node_verdicts.items() if v.kind == "pass"
        }
        samples = [
            r
            for r in log.records
            if len(r.nodes) == 2 and r.purpose != "scale" and r.figure is not None and set(r.nodes) <= good
        ]
        if not samples:
            return
        try:
            base = store.load(kind) or Baseline(kind, store.stack)
        except BaselineError:
            return  # an unusable file is named by the fleet step and never overwritten
        when = now_iso()
        share = self._share(kind)
        for r in samples:
            # Several collectives: each one's own busbw (r.figure is then the worst ratio, not a figure).
            measured = r.figures if r.figures else {collectives[0] if collectives else None: r.figure}
            for c, value in measured.items():
                if value is not None:
                    base.add(
                        baseline_metric(c),
                        "GB/s",
                        True,
                        Sample(float(value), "+".join(r.nodes), self.run_id, when, share=share),
                    )
        store.save(base)

    def _write_report(
        self, name: str, verdict: Verdict, result: IsolationResult, log: RunLog, check: str, started: str
    ) -> None:
        """The node's network verdict as ``network-report.json``, through the report model."""
        report = network_report(
            name,
            profile=self.suite,
            run_id=self.run_id,
            started=started,
            finished=utc_stamp(),
            check=check,
            passed=verdict.passed,
            summary=verdict.note if verdict.passed else verdict.first_failure[1],
            records=log.records,
            references=result.references,
        )
        report.write(self.ctx.paths.reports / name / "network-report.json")
