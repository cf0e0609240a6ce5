"""Run the localisation planner's rounds as Slurm jobs inside the certification hold.

The planner (planner.py) is pure: it says which groups to test and judges their figures. This
module runs its rounds through the head node, a constant number of commands per round whatever
the node count (the commands and the job argv are jobs.py's):

1. put on the shared filesystem each node's NODE.json for group tests (no peers), once per run
   (``<run>/nodes/<node>.json``), and each group's member list (``members.json``: names and
   addresses), in one command per round. A member's peers are the rest of that list
   (``validators run --peers-file``): a group of S nodes costs S entries, never S NODE.json files
   of S - 1 peers each (the scaling round's S = every node made that O(S^2): 930 MB through one
   stdin at 4,096 nodes);
2. submit every group's ``sbatch`` (``-w`` its nodes, ``--reservation`` the hold) in one command;
3. poll ``squeue`` for those jobs until none is left or the round's deadline (the jobs' running
   limit plus the time they may pend) has passed; cancel what is left;
4. read every report of the round back in one command that globs the round's folders: a group's
   figure is its rank-0 report's ``busbw``; a job that hung, was cancelled or lost a node gives no
   report, and the group is recorded as "no result" (the planner retests its nodes with
   known-good partners: never all nodes failed because one job failed). The tail of every job's
   output is read by the same command, and its telling lines go into the group's record.

A round in which a submission or a squeue failed, or a group gave no result, asks whether the
Slurm controller answers (``controller``): when it does not, ``ControllerError`` ends the step,
so no node is judged on a round the controller was away for.

Every group test lands in ``reports/network-groups.json`` (round, nodes, group size, purpose,
figure, job state, and rank 0's busbw-against-message-size curve) for the people's report, with
the median per group size (busbw against node count, and against message size per group size).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.certify.network.collectives import CollectiveReferences, Worst
from clusterforge.certify.network.figures import (
    collective_figures,
    group_curve,
    group_figure,
    median_curves,
    parse_cat,
    rank0,
)
from clusterforge.certify.network.jobs import (
    CAT_ROUND,
    MEMBERS_FILE,
    GroupJobs,
    HeadRun,
    NodeConfigs,
    no_report,
    sections,
    submit,
    telling_lines,
    write_files,
)
from clusterforge.certify.network.planner import IsolationResult, Planner, TestGroup
from clusterforge.journal import write_atomic
from clusterforge.node.report_model import NodeReport, ReportError
from clusterforge.waiting import wait_until

GROUPS_FILE = "network-groups.json"
REPORT_FIX = "fix: the validators on the node must write validators/report.schema.json (re-run configure)"


@dataclass
class GroupRecord:
    round: int
    purpose: str
    nodes: list[str]
    figure: float | None
    state: str  # "done" | "no report[: <job output>]" | "not submitted: ..." | "cancelled at the deadline"
    message_bytes: float | None = None
    curve: list[list[float]] = field(default_factory=list)  # [[bytes, busbw GB/s], ...] ascending
    size: int = 0  # nodes in the group (= len(nodes))
    output: list[str] = field(default_factory=list)  # the job output's telling lines (its tail)
    # Several collectives: rank 0's busbw of each, and the one furthest under its reference
    # (``figure`` is then the worst ratio in the primary's unit, group_collectives.py).
    figures: dict[str, float | None] = field(default_factory=dict)
    worst: Worst | None = None

    def __post_init__(self) -> None:
        self.size = self.size or len(self.nodes)


@dataclass(frozen=True)
class GroupReport:
    """One member's report of one group test, read through the report model."""

    round: int
    group: tuple[str, ...]
    report: NodeReport


@dataclass
class RunLog:
    records: list[GroupRecord] = field(default_factory=list)
    reports: dict[str, list[GroupReport]] = field(default_factory=dict)  # node -> its group reports
    # node -> why each of its group reports could not be read (file, key, bad value): never a pass
    malformed: dict[str, list[str]] = field(default_factory=dict)
    collectives: CollectiveReferences | None = None  # set when several collectives are judged
    delivered: set[str] = field(default_factory=set)  # nodes whose NODE.json is on the shared fs


def _deliver(
    head: HeadRun, jobs: GroupJobs, groups: Sequence[TestGroup], configs: NodeConfigs, log: RunLog
) -> str:
    """The round's files on the shared filesystem: NODE.json of nodes new to this run, then every
    group's member list. "" or why they could not be written."""
    new = sorted({n for g in groups for n in g.nodes} - log.delivered)
    files = {f"{jobs.nodes_folder}/{n}.json": json.dumps(jobs.member_config(configs.config(n))) for n in new}
    why = write_files(head, files)
    if why:
        return why
    log.delivered.update(new)
    members = {
        f"{jobs.group_folder(g, i)}/{MEMBERS_FILE}": json.dumps(
            [{"name": n, "address": configs.address(n)} for n in sorted(g.nodes)]
        )
        for i, g in enumerate(groups)
    }
    return write_files(head, members)


def run_round(
    head: HeadRun,
    jobs: GroupJobs,
    groups: Sequence[TestGroup],
    configs: NodeConfigs,
    log: RunLog,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    controller: Callable[[], None] = lambda: None,
) -> dict[TestGroup, float | None]:
    """Run one round's groups concurrently; the figure of each (None: no result). ``controller``
    raises when no Slurm controller answers; it is asked when something of the round failed."""
    why = _deliver(head, jobs, groups, configs, log)
    if why:
        controller()
        return _no_result(
            groups, log, f"not submitted: cannot write the group configs on the head node ({why})"
        )
    job_ids: dict[str, int] = {}
    states: dict[int, str] = {}
    for i, (rc, out, err) in enumerate(submit(head, [jobs.sbatch_argv(g, i) for i, g in enumerate(groups)])):
        job_id = out.strip().split(";")[0]
        if rc == 0 and job_id.isdigit():
            job_ids[job_id] = i
        else:
            states[i] = f"not submitted: sbatch exited {rc}: {' '.join((err or out).split())[-160:]}"
    if states:
        controller()  # every sbatch fails while the controller is away: not the groups' fault
    name = jobs.job_name(groups[0].round) if groups else ""
    left = set(job_ids)

    def still_queued() -> set[str]:
        rc, out, _ = head(["squeue", "-h", "-o", "%i", "-n", name])
        if rc == 0:
            left.intersection_update(out.split())
        else:
            controller()  # a busy controller is asked again until the deadline; a gone one ends the step
        return left

    if left:  # the jobs were just submitted: look after a pause
        wait_until(
            still_queued,
            lambda queued: not queued,
            timeout_s=jobs.deadline_s,
            poll_s=jobs.poll_s,
            pause_first=True,
            clock=clock,
            sleep=sleep,
        )
    if left:
        head(["scancel", "-n", name])
        for job_id in left:
            states[job_ids[job_id]] = f"cancelled at the {jobs.deadline_s:.0f} s deadline"
    outputs = {i: jobs.job_output(groups[i], i, job_id) for job_id, i in job_ids.items()}
    round_no = groups[0].round if groups else 0
    _, text, _ = head(["sh", "-c", CAT_ROUND, "sh", jobs.folder, str(round_no)])
    found = parse_cat(text)
    parts = sections(text)  # once per round: per job it was the round's whole text again (jobs x text)
    said = {i: telling_lines(parts.get(path, "")) for i, path in outputs.items()}
    figures: dict[TestGroup, float | None] = {}
    primary = jobs.collectives[0] if jobs.collectives else None
    judged: list[tuple[TestGroup, GroupRecord]] = []
    for i, group in enumerate(groups):
        folder = jobs.group_folder(group, i)
        read: dict[str, NodeReport | str] = {}
        for node in group.nodes:
            path = f"{folder}/{node}/report.json"
            if path in found:
                read[node] = report = group_report(path, found[path])
                if isinstance(report, NodeReport):
                    log.reports.setdefault(node, []).append(GroupReport(group.round, group.nodes, report))
                else:
                    log.malformed.setdefault(node, []).append(report)
        rank0_read = read.get(rank0(group))
        first = rank0_read.to_json() if isinstance(rank0_read, NodeReport) else None
        figure, nbytes = group_figure(first, jobs.check, primary)
        state = states.get(i) or (
            "done"
            if figure is not None
            else f"malformed report: {rank0_read}"
            if isinstance(rank0_read, str)
            else no_report(said.get(i, []), jobs)
        )
        figures[group] = figure if i not in states else None
        curve = group_curve(first, jobs.check, primary) if figures[group] is not None else []
        record = GroupRecord(
            group.round, group.purpose, list(group.nodes), figures[group], state, nbytes, curve,
            output=said.get(i, []) if figure is None else [],
        )  # fmt: skip
        if log.collectives is not None and i not in states:
            record.figures = collective_figures(first, jobs.check, log.collectives.collectives)
            if group.purpose != "scale":  # scaling groups are recorded, not judged
                judged.append((group, record))
        log.records.append(record)
    if log.collectives is not None and judged:
        _judge_collectives(log, log.collectives, judged, figures)
    if any(f is None for f in figures.values()):
        controller()  # jobs that died with the controller give no report: not the nodes' fault
    return figures


def group_report(path: str, data: dict[str, Any] | None) -> NodeReport | str:
    """A group member's report as read back (``parse_cat``), or why it is not one: the file, the
    key and the bad value, and the fix."""
    try:
        if data is None:
            raise ReportError(f"{path}: unreadable report (not a JSON object)")
        return NodeReport.parse(data, path)
    except ReportError as exc:
        return f"{exc}; {REPORT_FIX}"


def _judge_collectives(
    log: RunLog,
    refs: CollectiveReferences,
    judged: Sequence[tuple[TestGroup, GroupRecord]],
    figures: dict[TestGroup, float | None],
) -> None:
    """Every collective against its own reference; the planner gets the worst ratio (in the
    primary's unit). References take in this round's figures first, so round 1 judges itself."""
    refs.update((r.size, r.figures) for r in log.records if r.figures and r.purpose != "scale")
    for group, record in judged:
        figure, worst = refs.judge(record.size, record.figures)
        record.worst = worst
        record.figure = figures[group] = figure
        # a group without figures keeps what its job's output said (no_report)
        record.state = (
            "done" if figure is not None else (record.state if record.state != "done" else "no report")
        )


def _no_result(groups: Sequence[TestGroup], log: RunLog, why: str) -> dict[TestGroup, float | None]:
    for g in groups:
        log.records.append(GroupRecord(g.round, g.purpose, list(g.nodes), None, why))
    return dict.fromkeys(groups)


def run_isolation(
    head: HeadRun,
    planner: Planner,
    jobs: GroupJobs,
    configs: NodeConfigs,
    note: Callable[[str], None] = lambda _: None,
    references: CollectiveReferences | None = None,
    **timing: Any,
) -> tuple[IsolationResult, RunLog]:
    """Every round of ``planner`` until its verdicts are final. With several ``jobs.collectives``
    each is judged against ``references`` (stored baselines; else this run's medians)."""
    log = RunLog()
    if references is None and len(jobs.collectives) > 1:
        rules = planner.rules
        references = CollectiveReferences(jobs.collectives, {}, rules.fail_gap, rules.min_fleet_figures)
    log.collectives = references if len(jobs.collectives) > 1 else None
    while (groups := planner.next_round()) is not None:
        note(f"network round {groups[0].round}: {len(groups)} group job(s)")
        for group, figure in run_round(head, jobs, groups, configs, log, **timing).items():
            planner.record(group, figure)
    return planner.verdicts(), log


def scaling_sizes(count: int) -> list[int]:
    """Group sizes a scaling round measures over ``count`` healthy nodes: 4, 8, 16, ... below it,
    and all of them (pairs are measured by the planner already)."""
    sizes, k = [], 4
    while k < count:
        sizes.append(k)
        k *= 2
    return [*sizes, count] if count > 2 else []


def run_scaling(
    head: HeadRun,
    jobs: GroupJobs,
    healthy: Sequence[str],
    configs: NodeConfigs,
    log: RunLog,
    first_round: int,
    **timing: Any,
) -> None:
    """busbw at larger group sizes over nodes already found healthy, for the report (busbw against
    node count: scaling). Recorded, not judged: verdicts come from the pair tests."""
    nodes = sorted(healthy)
    for i, size in enumerate(scaling_sizes(len(nodes))):
        group = TestGroup(tuple(nodes[:size]), first_round + i, "scale")
        run_round(head, jobs, [group], configs, log, **timing)


def write_groups_file(reports_dir: Path, run_id: str, result: IsolationResult, log: RunLog) -> Path:
    """Every group test of the run, the references and the verdicts, for the people's report."""
    groups = [asdict(r) for r in log.records]
    data = {
        "run_id": run_id,
        "rounds": result.rounds,
        "jobs": result.jobs,
        "problem": result.problem,
        "references": {str(k): asdict(v) for k, v in result.references.items()},
        "groups": groups,
        # busbw against node count and against message size, per group size (medians over groups)
        "by_size": median_curves(groups),
        "nodes": {n: asdict(v) for n, v in result.node_verdicts.items()},
        "links": [asdict(v) for v in result.link_verdicts],
    }
    if log.collectives is not None:  # {size: {collective: reference}}: what each group's worst was held to
        data["collective_references"] = log.collectives.as_dict()
    path = reports_dir / GROUPS_FILE
    write_atomic(path, json.dumps(data, indent=2) + "\n")
    return path
