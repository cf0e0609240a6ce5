"""The benchmark's Slurm I/O through the head node: write job.json files, submit one job, wait for
it within its deadline, read its folder back (a constant number of head commands per job).

A job that has not started ``PENDING_S`` after submission is cancelled and reported with
Slurm's pending reason (a node drained meanwhile, a reservation); a running job past its time
limit is cancelled by name. Either way the folder is read back: whatever the node driver wrote
(which rank hung, after which step) is kept.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from clusterforge.benchmark.jobs import PENDING_S, JobSet, sbatch_argv
from clusterforge.benchmark.outcome import JobOutput
from clusterforge.certify.network.jobs import WRITE_FILES  # {path: text} on stdin -> files

HeadRun = Callable[..., tuple[int, str, str]]

# Prints {file name: text} of a job folder as one JSON object; logs (.err, .out) only their tails.
READ_FOLDER = (
    "import json,os,sys\n"
    "d=sys.argv[1];out={}\n"
    "names=sorted(os.listdir(d)) if os.path.isdir(d) else []\n"
    "for n in names:\n"
    "    p=os.path.join(d,n)\n"
    "    if not os.path.isfile(p) or not n.endswith(('.json','.jsonl','.out','.err')): continue\n"
    "    with open(p,'rb') as f:\n"
    "        if n.endswith(('.err','.out')): f.seek(max(0,os.path.getsize(p)-8192))\n"
    "        out[n]=f.read().decode('utf-8','replace')\n"
    "print(json.dumps(out))\n"
)


@dataclass
class Timing:
    poll_s: float = 2.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def one_line(text: str, limit: int = 200) -> str:
    return " ".join(text.split())[-limit:]


def write_files(head: HeadRun, files: dict[str, str]) -> str:
    """Write every file through the head node; "" or the error."""
    rc, out, err = head(["python3", "-c", WRITE_FILES], stdin=json.dumps(files))
    return "" if rc == 0 else f"cannot write the job files on the head node: {one_line(err or out)}"


def read_folder(head: HeadRun, folder: str) -> dict[str, str]:
    rc, out, _ = head(["python3", "-c", READ_FOLDER, folder])
    try:
        data = json.loads(out) if rc == 0 else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def run_job(
    head: HeadRun, jobs: JobSet, key: str, workload: str, nodes: tuple[str, ...], timing: Timing | None = None
) -> JobOutput:
    """Submit one job, wait for it, read its folder back."""
    timing = timing or Timing()
    folder = jobs.run_folder(key)
    began = timing.clock()
    rc, out, err = head(sbatch_argv(jobs, key, nodes))
    job_id = out.strip().split(";")[0]
    if rc != 0 or not job_id.isdigit():
        state = f"not submitted: sbatch exited {rc}: {one_line(err or out)}"
        return JobOutput(key, workload, nodes, folder, state)
    name = jobs.job_name(key)
    state = wait(head, job_id, name, jobs, timing, began)
    files = read_folder(head, folder)
    return JobOutput(key, workload, nodes, folder, state, job_id, files, round(timing.clock() - began, 1))


def wait(head: HeadRun, job_id: str, name: str, jobs: JobSet, timing: Timing, began: float) -> str:
    """Poll until the job leaves the queue ("done") or a deadline passes (cancelled, with why)."""
    started: float | None = None
    last = ""
    while True:
        rc, out, _ = head(["squeue", "-h", "-j", job_id, "-o", "%T|%r"])
        now = timing.clock()
        if rc == 0:  # a failed query (controller busy) is asked again
            line = out.strip()
            if not line:
                return "done"
            last = line
            job_state = line.split("|")[0]
            if job_state != "PENDING" and started is None:
                started = now
            if started is None and now - began > PENDING_S:
                head(["scancel", "-n", name])
                return f"cancelled: did not start within {PENDING_S} s (squeue: {last.replace('|', ' ')})"
            if started is not None and now - started > jobs.time_limit_min * 60 + 30:
                head(["scancel", "-n", name])
                return f"cancelled at the {jobs.time_limit_min} min time limit"
        elif now - began > jobs.deadline_s:
            head(["scancel", "-n", name])
            return f"cancelled: Slurm did not answer for {jobs.deadline_s:.0f} s"
        timing.sleep(timing.poll_s)


def dataset_ready(head: HeadRun, path: str, shape: dict[str, int]) -> bool:
    """True when a complete dataset of that shape is already on shared storage."""
    rc, out, _ = head(["cat", f"{path}/manifest.json"])
    if rc != 0:
        return False
    try:
        manifest = json.loads(out)
    except ValueError:
        return False
    return isinstance(manifest, dict) and all(manifest.get(k) == v for k, v in shape.items())
