"""Run the localisation planner's rounds as Slurm jobs inside the certification hold.

The planner (isolate.py) is pure: it says which groups to test and judges their figures. This
runner does the I/O, a constant number of head-node commands per round whatever the node count:

1. put on the shared filesystem each node's NODE.json for group tests (no peers), once per run
   (``<run>/nodes/<node>.json``, in commands of at most ``MAX_STDIN`` bytes each), and each
   group's member list (``members.json``: names and addresses), in one command per round. A
   member's peers are the rest of that list (``validators run --peers-file``): a group of S nodes
   costs S entries, never S NODE.json files of S - 1 peers each (the scaling round's S = every
   node made that O(S^2): 930 MB through one stdin at 4,096 nodes);
2. submit every group's ``sbatch`` (``-w`` its nodes, ``--reservation`` the hold) in one command:
   the argv lists go on its stdin to a small submitter on the head;
3. poll ``squeue`` for those job ids until none is left or the round's deadline (the jobs'
   running limit plus the time they may pend) has passed; cancel what is left;
4. read every report of the round back in one command that globs the round's folders on the
   head (never a list of paths as arguments: ssh joins argv into one shell line, and Linux
   refuses one argument over 128 KiB, which a path list passed at about 1,600 nodes): a group's
   figure is its rank-0 report's ``busbw``; a job that hung, was cancelled or lost a node gives
   no report, and the group is recorded as "no result" (the planner retests its nodes with
   known-good partners: never all nodes failed because one job failed). The same command reads
   the tail of every job's output (Slurm's ``-o`` file: NCCL's own error, or slurmstepd's
   "CANCELLED ... DUE TO TIME LIMIT"), and its telling lines go into the group's record and reason.

A job's Slurm time limit is sized from the suite's own bounds: every member's NODE.json gets
``durations.workload_timeout_seconds`` = ``run_timeout_s`` (each benchmark run's limit inside the
suite), and the job may run ``runs x run_timeout_s + startup_s``; so a hung run is ended by the
suite, which still writes its report with the reason, before Slurm would kill the job.

A round in which a submission or a squeue failed, or a group gave no result, asks whether the
Slurm controller answers (``controller``): when it does not, ``ControllerError`` ends the step,
so no node is judged on a round the controller was away for.

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
from clusterforge.slurm.parse import compress_hostlist
from clusterforge.waiting import wait_until

HeadRun = Callable[..., tuple[int, str, str]]
GROUPS_FILE = "network-groups.json"
MEMBERS_FILE = "members.json"
MAX_STDIN = 4 << 20  # bytes of files one write command carries

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
# Reads a JSON list of sbatch argv lists on stdin, submits each, prints a JSON list of
# [exit status, stdout, stderr]: one command submits a whole round.
SUBMIT = (
    "import json,subprocess,sys\n"
    "out=[]\n"
    "for a in json.load(sys.stdin):\n"
    "    try:\n"
    "        p=subprocess.run(a,capture_output=True,text=True)\n"
    "        out.append([p.returncode,p.stdout,p.stderr])\n"
    "    except OSError as e:\n"
    "        out.append([127,'',str(e)])\n"
    "json.dump(out,sys.stdout)\n"
)
# $1 the run's groups folder, $2 the round: prints every report of the round's groups and the last
# JOB_OUTPUT_BYTES of each job's output (NCCL_DEBUG=INFO makes it megabytes; the error is at its
# end), each after a header line, so one command with two short arguments reads back a whole round.
JOB_OUTPUT_BYTES = 4096
CAT_ROUND = (
    'for f in "$1"/r"$2"-g*/*/report.json "$1"/r"$2"-g*/job-*.out; do [ -e "$f" ] || continue; '
    'printf "=== %s\\n" "$f"; case "$f" in '
    f'*.out) tail -c {JOB_OUTPUT_BYTES} "$f" 2>/dev/null;; *) cat "$f" 2>/dev/null;; esac; printf "\\n"; done'
)


@dataclass(frozen=True)
class NodeConfigs:
    """What the group tests' nodes are sent: each node's NODE.json for group tests (no peers), and
    its address for the group member lists."""

    config: Callable[[str], dict[str, Any]]
    address: Callable[[str], str]


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
    def nodes_folder(self) -> str:
        """Each node's NODE.json for the group tests, written once per run."""
        return f"{self.shared_path.rstrip('/')}/.clusterforge/cert/{self.run_id}/nodes"

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
                "--config", f"{shlex.quote(self.nodes_folder)}/$SLURMD_NODENAME.json",
                "--peers-file", f"{shlex.quote(folder)}/{MEMBERS_FILE}",
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
            "-N", str(group.size), "-w", compress_hostlist(group.nodes), "--ntasks-per-node=1", *whole,
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
    delivered: set[str] = field(default_factory=set)  # nodes whose NODE.json is on the shared fs


def write_files(head: HeadRun, files: dict[str, str]) -> str:
    """Write ``{path: text}`` on the head node in commands of at most ``MAX_STDIN`` bytes each;
    "" or why a command failed."""
    chunk: dict[str, str] = {}
    size = 0
    items = list(files.items())
    for i, (path, text) in enumerate(items):
        chunk[path] = text
        size += len(path) + len(text)
        if size >= MAX_STDIN or i == len(items) - 1:
            rc, _, err = head(["python3", "-c", WRITE_FILES], stdin=json.dumps(chunk))
            if rc != 0:
                return " ".join(err.split())[-160:] or f"exit {rc}"
            chunk, size = {}, 0
    return ""


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


def _submit(head: HeadRun, argvs: list[list[str]]) -> list[tuple[int, str, str]]:
    """Every sbatch of a round in one command; (rc, stdout, stderr) of each."""
    rc, out, err = head(["python3", "-c", SUBMIT], stdin=json.dumps(argvs))
    try:
        answers = json.loads(out)
        if isinstance(answers, list) and len(answers) == len(argvs):
            return [(int(a[0]), str(a[1]), str(a[2])) for a in answers]
    except (json.JSONDecodeError, TypeError, ValueError, IndexError, KeyError):
        pass
    why = " ".join((err or out or f"exit {rc}").split())[-160:]
    return [(rc or 1, "", f"the submitter on the head node failed: {why}")] * len(argvs)


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
    for i, (rc, out, err) in enumerate(_submit(head, [jobs.sbatch_argv(g, i) for i, g in enumerate(groups)])):
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
    if any(f is None for f in figures.values()):
        controller()  # jobs that died with the controller give no report: not the nodes' fault
    return figures


def sections(text: str) -> dict[str, str]:
    """``CAT_ROUND`` output -> path: its text as printed."""
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
