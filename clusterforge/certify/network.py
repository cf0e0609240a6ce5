"""The multi-node network check as a Slurm job across held nodes.

Nodes under certification are in the maintenance reservation (see admission.py), so the job
runs with ``--reservation``: user work cannot land there, this job can. ``srun`` starts one
validators process per node; each reads its own NODE.json (with the other nodes as peers) from
the shared path, so one command line serves every node (``$SLURMD_NODENAME`` picks the file).
Reports are written to the shared path and read back through the head node.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.certify.reports import Verdict, read_verdict, stamp_run
from clusterforge.journal import write_atomic

NETWORK_CHECK = "gloo-allreduce"  # the CPU path; GPU nodes: nccl-multi-node
TIMED_OUT = 124  # `timeout`'s exit status
HeadRun = Callable[..., tuple[int, str, str]]  # (argv, stdin=None) -> (rc, out, err)


@dataclass(frozen=True)
class NetworkJob:
    run_id: str
    shared_path: str  # where every node sees shared storage
    profile: str
    reservation: str
    validators: Sequence[str]  # argv prefix of the validators CLI on the nodes
    check: str = NETWORK_CHECK
    time_limit_min: int = 15  # Slurm's limit on the job's running time
    pending_s: int = 120  # how long it may wait to start; with the run limit, its whole life

    @property
    def folder(self) -> str:
        return f"{self.shared_path.rstrip('/')}/.clusterforge/cert/{self.run_id}"

    @property
    def name(self) -> str:
        """The job's name: unique per run, so the deadline can cancel exactly this job."""
        return f"clusterforge-network-{self.run_id}"

    @property
    def deadline_s(self) -> int:
        """The job's whole life, pending included: past it the job is cancelled."""
        return self.time_limit_min * 60 + self.pending_s

    def sbatch_argv(self, nodes: Sequence[str]) -> list[str]:
        per_node = " ".join(
            [
                *map(shlex.quote, self.validators),
                "run", "--profile", shlex.quote(self.profile), "--checks", shlex.quote(self.check),
                "--config", f"{shlex.quote(self.folder)}/$SLURMD_NODENAME.json",
                "--out", f"{shlex.quote(self.folder)}/$SLURMD_NODENAME",
            ]
        )  # fmt: skip
        # srun's task runs the line through sh so that $SLURMD_NODENAME is the node it runs on.
        wrap = f"srun --ntasks-per-node=1 sh -c {shlex.quote(per_node)}"
        # `timeout` bounds the whole life (sbatch --wait alone waits for ever on a job that
        # never starts); on expiry the job itself is cancelled by name (run_network_check).
        return [
            "timeout", str(self.deadline_s),
            "sbatch", "--wait", f"--reservation={self.reservation}",
            "-N", str(len(nodes)), "-w", ",".join(sorted(nodes)), "--ntasks-per-node=1",
            "-t", str(self.time_limit_min), "-J", self.name,
            "-o", f"{self.folder}/job-%j.out", "--wrap", wrap,
        ]  # fmt: skip


def run_network_check(
    head: HeadRun,
    job: NetworkJob,
    configs: dict[str, dict[str, Any]],
    reports_dir: Path,
) -> dict[str, Verdict]:
    """Run the check across ``configs``' nodes; a verdict per node (report kept under reports_dir/<node>/)."""
    nodes = sorted(configs)
    rc, _, err = head(["mkdir", "-p", job.folder])
    if rc != 0:
        return _all_fail(nodes, f"cannot create {job.folder} on the head node: {err.strip()}")
    for name, config in configs.items():
        rc, _, err = head(
            ["sh", "-c", 'cat > "$1"', "sh", f"{job.folder}/{name}.json"], stdin=json.dumps(config)
        )
        if rc != 0:
            return _all_fail(nodes, f"cannot write {name}.json to the shared path: {err.strip()}")
    for name in nodes:  # never judge (or show) a node on an earlier run's network report
        (reports_dir / name / "network-report.json").unlink(missing_ok=True)
    rc, out, err = head(job.sbatch_argv(nodes))
    job_note = " ".join((err or out).split())[-200:]
    if rc == TIMED_OUT:
        head(["scancel", f"--name={job.name}"])
        job_note = f"cancelled at its {job.deadline_s} s deadline; {job_note or 'no output'}"
    verdicts: dict[str, Verdict] = {}
    for name in nodes:
        rc_cat, text, _ = head(["cat", f"{job.folder}/{name}/report.json"])
        local = reports_dir / name / "network-report.json"
        if rc_cat == 0 and text.strip():
            write_atomic(local, text)
            stamp_run(local, job.run_id)
            verdicts[name] = read_verdict(name, local)
        else:
            reason = (
                f"network check job gave no report for this node (sbatch rc {rc}: {job_note or 'no output'})"
            )
            verdicts[name] = Verdict(name, False, [(job.check, reason)], str(local))
    return verdicts


def _all_fail(nodes: Sequence[str], reason: str) -> dict[str, Verdict]:
    return {n: Verdict(n, False, [(NETWORK_CHECK, reason)]) for n in nodes}
