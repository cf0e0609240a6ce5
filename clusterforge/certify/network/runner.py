"""The certify stage's network step, whole: which node or link slows the fabric, as group tests.

One entry point, ``run_network(site, group, batch)``; ``unresponsive(site, names)`` is the step's
first half. The pipeline hands in what it knows as a ``NetworkSite`` (pipeline/network_stage.py
is only that adapter); the parts live beside this module:

1. Every node that passed its single-node checks must answer the Slurm controller
   (clusterforge/slurm/liveness.py); one that does not fails alone, before any multi-node job.
2. The planner (planner.py) plans rounds of pair tests; rounds.py runs each round's jobs
   concurrently in the hold (the jobs' argv and head commands: jobs.py). Up to two nodes certified
   earlier and idle are lent as known-good partners when the batch is small.
3. Each node gets the planner's verdict (verdicts.py, pure): pass, node fault, dead, flaky, or one
   end of a link fault (both nodes drained, the reason naming the link, unless the profile says to
   report links only). A node the planner could not resolve (too few figures and no baseline to
   judge against) is judged by its group tests' own floor checks, and the reason says so.
4. 2-node figures of nodes that passed enter the stored baseline (baselines.py), so the next run
   judges even two nodes against what the fabric did before.

What lands on disk: ``reports/<node>/network-report.json`` per node (its verdict, partners and
figures, stamped with the run id, report.py) and ``reports/network-groups.json`` (every group test).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.catalog import load_hardware
from clusterforge.certify.fleet.baseline import BaselineError, BaselineStore
from clusterforge.certify.fleet.rules import rules_for
from clusterforge.certify.network import verdicts as judge
from clusterforge.certify.network.baselines import record_samples, stored_references
from clusterforge.certify.network.collectives import CollectiveReferences
from clusterforge.certify.network.jobs import GroupJobs, HeadRun, NodeConfigs
from clusterforge.certify.network.planner import IsolationResult, Planner
from clusterforge.certify.network.report import network_report
from clusterforge.certify.network.rounds import RunLog, run_isolation, run_scaling, write_groups_file
from clusterforge.journal import now_iso
from clusterforge.node.config import GPU_GROUP_LAUNCHER, render_node_config
from clusterforge.node.report_model import utc_stamp
from clusterforge.node.reports import Verdict
from clusterforge.providers.base import Node
from clusterforge.slurm import liveness
from clusterforge.slurm.admission import Admission, AdmissionError, ControllerError

MAX_LENT = 2  # known-good partners lent to a small batch
SMALL_BATCH = 3


@dataclass(frozen=True)
class NetworkSite:
    """What the network step needs of the stack and the run (the pipeline's context adapts to it)."""

    spec: Any  # the ClusterSpec: NODE.json, the shared path, the baseline store's stack
    admission: Admission
    head: Node
    run_id: str
    suite: str  # the validators profile the group jobs run
    validators: Sequence[str]  # the validators command on a node
    reports_dir: Path
    compute: Callable[[], list[Node]]
    certified: Callable[[str], bool]  # certified earlier (may be lent as a partner)
    head_runner: Callable[[Node, float], HeadRun]  # (head, timeout_s) -> a command runner
    note: Callable[[str, str], None]  # (node, text): what the node is doing now
    drain_links: Callable[[str], bool]  # the node's profile says link_faults: "drain" (not "report")
    share: Callable[[], str]  # container types: the share of the machine each node has


@dataclass(frozen=True)
class NetworkOutcome:
    verdicts: dict[str, Verdict]
    result: IsolationResult | None


def group_node_config(spec: Any, node: Node, peers: list[Node], one_launcher: bool) -> dict[str, Any]:
    """NODE.json of a group test's member (sent without peers: each job names its group's member
    list, ``validators run --peers-file``). nccl-multi-node refuses peers without nccl.launcher, so
    a GPU group (one launcher per job) gets the srun one; gloo ranks are started by the job itself."""
    return render_node_config(spec, node, peers, launcher=GPU_GROUP_LAUNCHER if one_launcher else ())


def network_check_id(node: Node) -> str:
    it = load_hardware().get(node.instance_type)
    return judge.network_check_id(it is not None and it.gpu is not None)


def _note(site: NetworkSite, nodes: Sequence[str], text: str) -> None:
    for name in nodes:
        site.note(name, text)


def unresponsive(site: NetworkSite, names: list[str]) -> dict[str, str]:
    """Nodes (of ``names``) that cannot take a Slurm job now, with the reason. ControllerError
    passes: the controller's fault, not the nodes' (the certify stage waits or stops)."""
    _note(site, names, "checking that slurmd answers the controller")
    try:
        states = site.admission.nodes()
    except ControllerError:
        raise
    except AdmissionError as exc:
        return {n: f"cannot read Slurm's node states: {exc}" for n in names}
    head_run = site.head_runner(site.head, liveness.PROBE_TIMEOUT_S + 60)
    return liveness.unresponsive(
        head_run, states, names, site.admission.reservation, f"clusterforge-probe-{site.run_id}"
    )


def lend_partners(site: NetworkSite, exclude: set[str], kind: str) -> list[Node]:
    """Certified, idle nodes of the same type, held for this check as known-good partners."""
    try:
        states = site.admission.nodes()
    except ControllerError:
        raise
    except AdmissionError:
        return []
    lent: list[Node] = []
    for n in site.compute():
        if len(lent) >= MAX_LENT:
            break
        if n.name in exclude or n.instance_type != kind or not site.certified(n.name):
            continue
        state = states.get(n.name)
        if state is None or not state.serving or state.state != "idle":
            continue
        try:
            site.admission.hold([n.name])
        except ControllerError:
            raise
        except AdmissionError:
            continue
        if unresponsive(site, [n.name]):
            site.admission.release(n.name)
            continue
        lent.append(n)
    return lent


def run_network(
    site: NetworkSite, group: list[Node], batch: set[str], attempt: int = 1, scaling: bool = True
) -> NetworkOutcome:
    """Verdicts for ``group`` (nodes of ``batch`` that passed everything so far and answer the
    controller; one instance type). Nodes of the batch that failed earlier are never lent as
    partners. ``attempt``: the step's run for this certify stage (a step run again, or another
    type, gets folders and job names of its own); ``scaling``: measure busbw at larger group sizes
    once the pairs are judged."""
    started = utc_stamp()
    kind = group[0].instance_type
    check = network_check_id(group[0])
    lent = lend_partners(site, batch, kind) if len(group) <= SMALL_BATCH else []
    nodes = {n.name: n for n in [*group, *lent]}
    if len(nodes) < 2:
        return NetworkOutcome(judge.alone([n.name for n in group], kind), None)
    store = BaselineStore(site.spec.stack)
    collectives = _collectives(site, group[0], check)
    baselines = _baselines(site, store, kind, collectives or (None,))
    primary = baselines.get(collectives[0] if collectives else None)
    # The pair test's own gaps where the catalogue gives them (fleet metric network.2node.busbw).
    gaps = rules_for(load_hardware(), kind, judge.BASELINE_METRIC)
    rules = judge.isolation_rules(gaps.fail_gap_pct, gaps.warn_gap_pct, primary, check)
    planner = Planner([n.name for n in group], rules=rules, known_good=[n.name for n in lent])
    it = load_hardware().get(kind)
    jobs = GroupJobs(
        site.run_id if attempt == 1 else f"{site.run_id}.{attempt}", site.spec.storage.shared_path or "",
        site.suite, site.admission.reservation, site.validators, check,
        one_launcher=check != judge.GLOO_CHECK, collectives=collectives,
        gpus_per_node=it.gpu_count if it is not None else 0, efa=it is not None and it.has_efa,
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
    head_run = site.head_runner(site.head, jobs.deadline_s + 120)
    configs = NodeConfigs(
        lambda name: group_node_config(site.spec, nodes[name], [], jobs.one_launcher),
        lambda name: nodes[name].address,
    )
    timing = {"controller": site.admission.check_controller}

    _note(site, list(nodes), "network: group tests (Slurm jobs in the hold)")
    try:
        result, log = run_isolation(
            head_run,
            planner,
            jobs,
            configs,
            note=lambda text: _note(site, list(nodes), text),
            references=references,
            **timing,
        )
        healthy = [n for n, v in result.node_verdicts.items() if v.ok] + [n.name for n in lent]
        if scaling and len(group) >= SMALL_BATCH:  # not for one or two nodes re-certified
            _note(site, healthy, "network: scaling tests (busbw against group size, for the report)")
            run_scaling(head_run, jobs, healthy, configs, log, result.rounds + 1, **timing)
    finally:
        for n in lent:
            site.admission.release(n.name)
    write_groups_file(site.reports_dir, site.run_id, result, log)
    verdicts = {
        n.name: judge.node_verdict(n.name, result, log, check, rules.fail_gap, site.drain_links)
        for n in group
    }
    for name, verdict in verdicts.items():
        _write_report(site, name, verdict, result, log, check, started)
    share = _share(site, kind)
    samples = judge.baseline_samples(result, log, verdicts)
    record_samples(store, kind, samples, collectives, site.run_id, now_iso(), share)
    return NetworkOutcome(verdicts, result)


def _collectives(site: NetworkSite, node: Node, check: str) -> tuple[str, ...]:
    """nccl-multi-node's collectives, read from the NODE.json the group jobs get (so the step
    judges what the nodes run)."""
    if check == judge.GLOO_CHECK:
        return ()
    nccl = render_node_config(site.spec, node).get("nccl") or {}
    return tuple(nccl.get("multi_node_collectives") or ("all_reduce",))


def _baselines(
    site: NetworkSite, store: BaselineStore, kind: str, collectives: tuple[str | None, ...]
) -> dict[str | None, float]:
    """Stored 2-node figure per collective (None: the gloo path), those with one; why any was not
    used goes to the nodes' notes."""
    try:
        values, notes = stored_references(store, kind, collectives, _share(site, kind))
    except BaselineError as exc:
        _note(site, [n.name for n in site.compute()], f"network baseline not used: {exc}")
        return {}
    for why in notes:
        _note(site, [n.name for n in site.compute() if n.instance_type == kind], why)
    return values


def _share(site: NetworkSite, kind: str) -> str:
    """Container types: the share of the machine each node has (baselines keep it); else ""."""
    it = load_hardware().get(kind)
    return site.share() if it is not None and it.container else ""


def _write_report(
    site: NetworkSite,
    name: str,
    verdict: Verdict,
    result: IsolationResult,
    log: RunLog,
    check: str,
    started: str,
) -> None:
    """The node's network verdict as ``network-report.json``, through the report model."""
    report = network_report(
        name,
        profile=site.suite,
        run_id=site.run_id,
        started=started,
        finished=utc_stamp(),
        check=check,
        passed=verdict.passed,
        summary=verdict.note if verdict.passed else verdict.first_failure[1],
        records=log.records,
        references=result.references,
    )
    report.write(site.reports_dir / name / "network-report.json")
