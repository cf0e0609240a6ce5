"""Run the localisation planner's rounds as Slurm jobs inside the certification hold.

The planner (isolate.py) is pure: it says which groups to test and judges their figures. This
runner does the I/O, a constant number of head-node commands per round whatever the node count:

1. write every group member's NODE.json (its peers = the rest of its group) in one command;
2. submit one ``sbatch`` per group (``-w`` its nodes, ``--reservation`` the hold), all at once;
3. poll ``squeue`` for those job ids until none is left or the round's deadline (the jobs'
   running limit plus the time they may pend) has passed; cancel what is left;
4. read every group's rank-0 report in one command: its figure is the check's ``busbw``; a job
   that hung, was cancelled or lost a node gives no report, and the group is recorded as "no
   result" (the planner retests its nodes with known-good partners: never all nodes failed
   because one job failed). The same command reads the tail of every job's output (Slurm's
   ``-o`` file: NCCL's own error, or slurmstepd's "CANCELLED ... DUE TO TIME LIMIT"), and its
   telling lines go into the group's record and reason.

A job's Slurm time limit is sized from the suite's own bounds: every member's NODE.json gets
``durations.workload_timeout_seconds`` = ``run_timeout_s`` (each benchmark run's limit inside the
suite), and the job may run ``runs x run_timeout_s + startup_s``; so a hung run is ended by the
suite, which still writes its report with the reason, before Slurm would kill the job.

Every group test lands in ``reports/network-groups.json`` (round, nodes, group size, purpose,
figure, job state, and rank 0's busbw-against-message-size curve) for the people's report, with
the median per group size (busbw against node count, and against message size per group size).
"""

from __future__ import annotations

import json
import math
import re
import shlex
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
from clusterforge.certify.network.planner import IsolationResult, Planner, TestGroup
from clusterforge.journal import write_atomic
from clusterforge.waiting import wait_until

HeadRun = Callable[..., tuple[int, str, str]]
ConfigFor = Callable[[str, Sequence[str]], dict[str, Any]]  # (node, its peers) -> NODE.json
GROUPS_FILE = "network-groups.json"

# Reads {path: text} JSON on stdin and writes each file: one command for a whole round.
WRITE_FILES = (
    "import json,os,sys\n"
    "for p,t in json.load(sys.stdin).items():\n"
    "    os.makedirs(os.path.dirname(p),exist_ok=True)\n"
    "    open(p,'w').write(t)\n"
)
# The algorithm of every 2-node nccl-tests group job. At 2 nodes tree/NVLS can report busbw above the
# NIC line rate (NVIDIA/nccl-tests issues 22 and 196, NVIDIA/nccl issue 812: "Forcing NCCL_ALGO=RING when
# using two nodes will give you a better representation"); the catalogue's 2-node floors are Ring
# figures (hardware.yaml, tests/catalog/test_hardware.py holds them to this).
PAIR_ALGORITHM = "Ring"
# Prints each file after a header line, so one command reads back a round's reports, and the last
# JOB_OUTPUT_BYTES of each job's output (NCCL_DEBUG=INFO makes it megabytes; the error is at its end).
JOB_OUTPUT_BYTES = 4096
CAT_FILES = (
    'for f in "$@"; do printf "=== %s\\n" "$f"; case "$f" in '
    f'*.out) tail -c {JOB_OUTPUT_BYTES} "$f" 2>/dev/null;; *) cat "$f" 2>/dev/null;; esac; printf "\\n"; done'
)
# Each benchmark run inside a group job (one per collective) is ended by the suite after this long
# (NODE.json durations.workload_timeout_seconds, written into every member's config). A 2-node
# nccl-tests sweep of the standard profile (256 MiB to 16 GiB, 20 iterations) takes well under a
# minute at the catalogue's floors (the slowest, alltoall at 23 GB/s, moves 16 GiB in ~0.7 s per
# iteration); ten minutes leaves room for NCCL's set-up over EFA and for the full profile's 50.
GROUP_RUN_TIMEOUT_S = 600
# Beside the runs: srun starting the ranks, Python and the suite starting, the report written.
GROUP_STARTUP_S = 300
# The Open MPI / PMIx environment AWS's nccl-tests image sets for `srun --mpi=pmix` on EFA
# (aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/nccl-tests.Dockerfile ENV:
# OMPI_MCA_pml=^ucx, OMPI_MCA_btl=tcp,self, PMIX_MCA_gds=hash, the last against open-mpi/ompi issue
# 7516). Set with `env` in the job (sbatch --export cannot carry a value with a comma); the launcher
# srun passes the job's environment on to every rank.
EFA_LAUNCH_ENV = ("OMPI_MCA_pml=^ucx", "OMPI_MCA_btl=tcp,self", "PMIX_MCA_gds=hash")
# Lines of a job's output that say why it ended: NCCL's and nccl-tests' errors, Slurm's own words.
_TELLING = re.compile(
    r"NCCL WARN|Test (?:NCCL |CUDA )?failure|NCCL failure|DUE TO TIME LIMIT|CANCELLED|error|Error|"
    r"Killed|Aborted|timed out|srun: "
)


@dataclass(frozen=True)
class GroupJobs:
    """How the round's jobs are run: where, with which validators, within which deadline."""

    run_id: str
    shared_path: str
    profile: str
    reservation: str
    validators: Sequence[str]
    check: str
    pending_s: int = 120  # how long a job may wait to start
    poll_s: float = 3.0
    # gloo: one validators process per node (srun), each a rank. nccl-tests: one validators
    # process on the job's first node, which launches the ranks itself (NODE.json nccl.launcher).
    one_launcher: bool = False
    # nccl-multi-node's collectives (NODE.json nccl.multi_node_collectives), the first the primary:
    # with more than one, each is judged against its own reference (group_collectives.py).
    collectives: tuple[str, ...] = ()
    # GPUs per node of the group's type: one_launcher jobs take whole nodes and their GPUs, so the
    # ranks the launcher starts (one per GPU) get CPUs and the GPU devices (ConstrainDevices).
    gpus_per_node: int = 0
    # The suite's limit on each benchmark run, and the job's time beside its runs (see above).
    run_timeout_s: int = GROUP_RUN_TIMEOUT_S
    startup_s: int = GROUP_STARTUP_S
    # EFA nodes: the launcher's Open MPI / PMIx environment (EFA_LAUNCH_ENV).
    efa: bool = False

    @property
    def runs(self) -> int:
        """Benchmark runs one job makes: one per collective."""
        return max(1, len(self.collectives))

    @property
    def time_limit_min(self) -> int:
        """Slurm's limit on a job's running time (whole minutes, sbatch -t): longer than the suite's
        own bound on its runs, so the suite, not Slurm, ends a hung run and reports why."""
        return math.ceil((self.runs * self.run_timeout_s + self.startup_s) / 60)

    def member_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """A member's NODE.json with each run's limit under the job's (an existing lower one stays)."""
        durations = dict(config.get("durations") or {})
        current = durations.get("workload_timeout_seconds")
        durations["workload_timeout_seconds"] = (
            min(current, self.run_timeout_s) if current else self.run_timeout_s
        )
        return {**config, "durations": durations}

    def job_output(self, group: TestGroup, index: int, job_id: str) -> str:
        return f"{self.group_folder(group, index)}/job-{job_id}.out"

    @property
    def folder(self) -> str:
        return f"{self.shared_path.rstrip('/')}/.clusterforge/cert/{self.run_id}/groups"

    @property
    def deadline_s(self) -> float:
        return self.time_limit_min * 60 + self.pending_s

    def group_folder(self, group: TestGroup, index: int) -> str:
        return f"{self.folder}/r{group.round}-g{index}"

    def job_name(self, round_no: int) -> str:
        """One name for every job of a round: squeue/scancel by name never meet a purged job id."""
        return f"clusterforge-net-{self.run_id}-r{round_no}"

    def sbatch_argv(self, group: TestGroup, index: int) -> list[str]:
        folder = self.group_folder(group, index)
        per_node = " ".join(
            [
                *map(shlex.quote, self.validators),
                "run", "--profile", shlex.quote(self.profile), "--checks", shlex.quote(self.check),
                "--config", f"{shlex.quote(folder)}/$SLURMD_NODENAME.json",
                "--out", f"{shlex.quote(folder)}/$SLURMD_NODENAME",
            ]
        )  # fmt: skip
        if self.efa:
            per_node = " ".join(["env", *map(shlex.quote, EFA_LAUNCH_ENV), per_node])
        wrap = per_node if self.one_launcher else f"srun --ntasks-per-node=1 sh -c {shlex.quote(per_node)}"
        export = [f"--export=ALL,NCCL_ALGO={PAIR_ALGORITHM}"] if group.size == 2 and self.one_launcher else []
        whole = ["--exclusive"] if self.one_launcher else []
        if self.one_launcher and self.gpus_per_node > 0:
            whole.append(f"--gpus-per-node={self.gpus_per_node}")
        return [
            "sbatch", "--parsable", f"--reservation={self.reservation}",
            "-N", str(group.size), "-w", ",".join(sorted(group.nodes)), "--ntasks-per-node=1", *whole,
            "-t", str(self.time_limit_min), "-J", self.job_name(group.round),
            "-o", f"{folder}/job-%j.out", *export, "--wrap", wrap,
        ]  # fmt: skip


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


@dataclass
class RunLog:
    records: list[GroupRecord] = field(default_factory=list)
    reports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # node -> its group reports
    collectives: CollectiveReferences | None = None  # set when several collectives are judged


def run_round(
    head: HeadRun,
    jobs: GroupJobs,
    groups: Sequence[TestGroup],
    config_for: ConfigFor,
    log: RunLog,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[TestGroup, float | None]:
    """Run one round's groups concurrently; the figure of each (None: no result)."""
    files = {}
    for i, group in enumerate(groups):
        for node in group.nodes:
            peers = [n for n in group.nodes if n != node]
            files[f"{jobs.group_folder(group, i)}/{node}.json"] = json.dumps(
                jobs.member_config(config_for(node, peers))
            )
    rc, _, err = head(["python3", "-c", WRITE_FILES], stdin=json.dumps(files))
    if rc != 0:
        why = (
            f"not submitted: cannot write the group configs on the head node ({' '.join(err.split())[-160:]})"
        )
        return _no_result(groups, log, why)
    job_ids: dict[str, int] = {}
    states: dict[int, str] = {}
    for i, group in enumerate(groups):
        rc, out, err = head(jobs.sbatch_argv(group, i))
        job_id = out.strip().split(";")[0]
        if rc == 0 and job_id.isdigit():
            job_ids[job_id] = i
        else:
            states[i] = f"not submitted: sbatch exited {rc}: {' '.join((err or out).split())[-160:]}"
    name = jobs.job_name(groups[0].round) if groups else ""
    left = set(job_ids)

    def still_queued() -> set[str]:
        rc, out, _ = head(["squeue", "-h", "-o", "%i", "-n", name])
        if rc == 0:  # a failed query (controller busy) is asked again until the deadline
            left.intersection_update(out.split())
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
    paths = [f"{jobs.group_folder(g, i)}/{n}/report.json" for i, g in enumerate(groups) for n in g.nodes]
    outputs = {i: jobs.job_output(groups[i], i, job_id) for job_id, i in job_ids.items()}
    _, text, _ = head(["sh", "-c", CAT_FILES, "sh", *paths, *outputs.values()])
    found = parse_cat(text)
    said = {i: telling_lines(sections(text).get(path, "")) for i, path in outputs.items()}
    figures: dict[TestGroup, float | None] = {}
    primary = jobs.collectives[0] if jobs.collectives else None
    judged: list[tuple[TestGroup, GroupRecord]] = []
    for i, group in enumerate(groups):
        folder = jobs.group_folder(group, i)
        for node in group.nodes:
            report = found.get(f"{folder}/{node}/report.json")
            if report is not None:
                log.reports.setdefault(node, []).append(
                    {**report, "group": list(group.nodes), "round": group.round}
                )
        first = found.get(f"{folder}/{rank0(group)}/report.json")
        figure, nbytes = group_figure(first, jobs.check, primary)
        state = states.get(i) or ("done" if figure is not None else no_report(said.get(i, []), jobs))
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
    return figures


def sections(text: str) -> dict[str, str]:
    """``CAT_FILES`` output -> path: its text as printed."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("=== "):
            current = out.setdefault(line[4:], [])
        elif current is not None:
            current.append(line)
    return {path: "\n".join(lines) for path, lines in out.items()}


def telling_lines(output: str, most: int = 5) -> list[str]:
    """The lines of a job's output that say why it ended (NCCL's errors, Slurm's time limit), last
    first kept; else its last non-empty line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    telling = [line for line in lines if _TELLING.search(line)]
    picked = telling[-most:] if telling else lines[-1:]
    return [line[:300] for line in picked]


def no_report(output: list[str], jobs: GroupJobs) -> str:
    """The state of a finished job that left no figure, with what its output says."""
    if any("DUE TO TIME LIMIT" in line for line in output):
        return f"no report: Slurm ended the job at its {jobs.time_limit_min} min time limit ({output[-1]})"
    return "no report" + (f": {output[-1]}" if output else "")


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
    config_for: ConfigFor,
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
        for group, figure in run_round(head, jobs, groups, config_for, log, **timing).items():
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
    config_for: ConfigFor,
    log: RunLog,
    first_round: int,
    **timing: Any,
) -> None:
    """busbw at larger group sizes over nodes already found healthy, for the report (busbw against
    node count: scaling). Recorded, not judged: verdicts come from the pair tests."""
    nodes = sorted(healthy)
    for i, size in enumerate(scaling_sizes(len(nodes))):
        group = TestGroup(tuple(nodes[:size]), first_round + i, "scale")
        run_round(head, jobs, [group], config_for, log, **timing)


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
