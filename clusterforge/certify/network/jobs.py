"""How a round's group tests reach Slurm: the jobs' argv, the files and the head-node commands.

Every I/O of a round is a constant number of head-node commands whatever the node count
(rounds.py says which): the files a round needs go in commands of at most ``MAX_STDIN`` bytes
(``WRITE_FILES``), every ``sbatch`` of a round goes through one submitter (``SUBMIT``), and one
command globs a round's reports and job outputs back (``CAT_ROUND``: never a list of paths as
arguments; ssh joins argv into one shell line and Linux refuses one argument over 128 KiB, which a
path list passed at about 1,600 nodes). The job's output tail is read for its telling lines (NCCL's
own error, or slurmstepd's "CANCELLED ... DUE TO TIME LIMIT").

A job's Slurm time limit is sized from the suite's own bounds: every member's NODE.json gets
``durations.workload_timeout_seconds`` = ``run_timeout_s`` (each benchmark run's limit inside the
suite), and the job may run ``runs x run_timeout_s + startup_s``; so a hung run is ended by the
suite, which still writes its report with the reason, before Slurm would kill the job.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from clusterforge.certify.network.model import TestGroup
from clusterforge.slurm.parse import compress_hostlist

HeadRun = Callable[..., tuple[int, str, str]]
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


def submit(head: HeadRun, argvs: list[list[str]]) -> list[tuple[int, str, str]]:
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
