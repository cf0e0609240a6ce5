"""A fake head node for the health loop: scontrol / sinfo / squeue / sbatch / scancel as a small
state machine that keeps Slurm 22.05's rules (formats as captured in tests/data/slurm/):

- a DRAIN node starts no job, not even inside a reservation (tests/data/slurm/README.md); a drained
  node with a running job is ``draining`` until the job ends;
- a node in a MAINT reservation takes only jobs of that reservation (sinfo ``maint`` / ``<state>$``);
- preempt/partition_prio with PreemptMode=CANCEL: a pending job of a higher PriorityTier partition
  cancels the running job of a lower one on its node (GraceTime=0: at once, the batch script is killed
  and writes nothing more); a job in a MAINT reservation is never preempted (no user job lands there);
- the health partition is Hidden=YES: squeue shows its jobs only with ``--all``; AllowGroups=root:
  only root submits there; a job cancelled by preemption leaves the queue (squeue lists pending and
  running jobs only);
- a controller that is down answers nothing: ``scontrol ping`` says DOWN, every other command fails.

A finished health job writes what the loop's batch script writes: ``report.json`` and ``rc`` in the
folder named by the script's ``d=`` line, under the test's tmp folder (the "shared storage").
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.slurm import admission
from clusterforge.slurm.parse import compress_hostlist, expand_hostlist

TIER = {"batch": 10, "health": 1}  # PriorityTier (roles/slurm: user partitions 10, health 1)
PREEMPT_MODE = {"batch": "OFF", "health": "CANCEL"}
HIDDEN = {"health"}


@dataclass
class Job:
    id: str
    name: str
    partition: str
    node: str
    user: str
    state: str = "PENDING"
    reservation: str = ""
    script: str = ""
    requeue: bool = True
    end: str = ""  # COMPLETED, PREEMPTED, CANCELLED


class Crash(Exception):
    """Raised by the fake to kill the loop mid-round (after a command took effect)."""


def report(node: str, passed: bool = True, reason: str = "", rate: float | None = None) -> dict[str, Any]:
    evidence: dict[str, Any] = {"command": None, "lines": []}
    check: dict[str, Any] = {"id": "gpu-health", "status": "pass" if passed else "fail", "metrics": {},
                             "threshold": {}, "evidence": evidence,
                             "summary": "all GPUs healthy" if passed else reason}  # fmt: skip
    checks = [check]
    if rate is not None:
        checks.append({"id": "matmul-burnin", "status": "pass", "summary": f"{rate} GFLOP/s",
                       "threshold": {}, "evidence": evidence,
                       "metrics": {"rate_device_0": {"value": rate, "unit": "GFLOP/s"}}})  # fmt: skip
    return {
        "schema_version": 1, "node": node, "profile": "quick", "started": "2026-12-05T01:00:00Z",
        "finished": "2026-12-05T01:01:00Z", "verdict": "pass" if passed else "fail",
        "counts": {"pass": len(checks) - (0 if passed else 1), "fail": 0 if passed else 1},
        "checks": checks, "instance_type": "local",
    }  # fmt: skip


class FakeHead:
    def __init__(self, nodes: list[str]) -> None:
        self.nodes: dict[str, dict[str, Any]] = {
            n: {"drain": False, "reason": "", "down": False} for n in nodes
        }
        self.jobs: dict[str, Job] = {}  # pending and running
        self.ended: dict[str, Job] = {}
        self.reservations: dict[str, list[str]] = {}
        self.controller_up = True
        self.calls: list[list[str]] = []
        self.next_id = 100
        self.crash_after_sbatch: int | None = None  # raise Crash after this many more health sbatch
        self.user = "root"  # who runs the commands (the loop runs as root)

    # -- helpers for tests -------------------------------------------------------------

    def health_jobs(self, node: str | None = None) -> list[Job]:
        return [j for j in self.jobs.values() if j.partition == "health" and (node is None or j.node == node)]

    def submitted(self) -> list[list[str]]:
        return [c for c in self.calls if c and c[0] == "sbatch"]

    def submit_user_job(self, node: str, user: str = "alice") -> Job:
        job = self._new_job("train", "batch", node, user, "", True, "")
        self._schedule()
        return job

    def end_job(self, job: Job, state: str = "COMPLETED") -> None:
        job.state, job.end = state, state
        self.jobs.pop(job.id, None)
        self.ended[job.id] = job
        self._schedule()

    def finish(self, node: str, rc: int = 0, body: dict[str, Any] | None = None, passed: bool = True,
               reason: str = "", rate: float | None = None) -> Job:  # fmt: skip
        """The running health job on ``node`` ends by itself: its script writes report.json and rc."""
        (job,) = [j for j in self.health_jobs(node) if j.state == "RUNNING"]
        folder = self.job_folder(job)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text(json.dumps(body or report(node, passed, reason, rate)))
        (folder / "rc").write_text(f"{rc}\n")
        self.end_job(job)
        return job

    def job_folder(self, job: Job) -> Path:
        match = re.match(r"d=(\S+)/\$SLURM_JOB_ID;", job.script)
        assert match, f"the loop's batch script names no job folder: {job.script}"
        return Path(shlex.split(match.group(1))[0]) / job.id

    def state_of(self, node: str, busy: set[str] | None = None) -> str:
        n = self.nodes[node]
        if busy is None:
            busy = {j.node for j in self.jobs.values() if j.state == "RUNNING"}
        running = node in busy
        if n["down"]:
            state = "down*"
        elif n["drain"]:
            state = "draining" if running else "drained"
        else:
            state = "allocated" if running else "idle"
        if any(node in nodes for nodes in self.reservations.values()):  # a few reservations, short lists
            state = "maint" if state == "idle" else state + "$"
        return state

    # -- Slurm's scheduler -----------------------------------------------------------

    def _new_job(self, name: str, partition: str, node: str, user: str, reservation: str,
                 requeue: bool, script: str) -> Job:  # fmt: skip
        job = Job(str(self.next_id), name, partition, node, user, "PENDING", reservation, script, requeue)
        self.next_id += 1
        self.jobs[job.id] = job
        return job

    def _schedule(self) -> None:
        pending = sorted(
            (j for j in self.jobs.values() if j.state == "PENDING"),
            key=lambda j: (-TIER[j.partition], int(j.id)),
        )
        for job in pending:
            node = self.nodes.get(job.node)
            if node is None or node["drain"] or node["down"]:
                continue  # ReqNodeNotAvail: a drained node starts nothing
            held_by = [r for r, nodes in self.reservations.items() if job.node in nodes]
            if held_by and job.reservation not in held_by:
                continue  # MAINT reservation: only its own jobs
            if job.reservation and not held_by:
                continue
            running = [j for j in self.jobs.values() if j.state == "RUNNING" and j.node == job.node]
            for other in running:
                may_preempt = (
                    TIER[job.partition] > TIER[other.partition]
                    and PREEMPT_MODE[other.partition] == "CANCEL"
                    and not other.reservation  # nothing of a user's reaches a MAINT reservation
                )
                if not may_preempt:
                    break
                other.state, other.end = "PREEMPTED", "PREEMPTED"  # GraceTime=0: killed, writes nothing
                self.jobs.pop(other.id)
                self.ended[other.id] = other
            else:
                job.state = "RUNNING"

    # -- the commands --------------------------------------------------------------------

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        if argv == admission.PING:
            state = "UP" if self.controller_up else "DOWN"
            return int(not self.controller_up), f"Slurmctld(primary) at head-001 is {state}\n", ""
        if not self.controller_up:
            return 1, "", f"{argv[0]}: error: Unable to contact slurm controller (connect failure)\n"
        if argv[:3] == ["sh", "-c", admission.DRAIN_SCRIPT]:
            rows = []
            for line in (stdin or "").splitlines():
                hl, reason = line.split("\t", 1)
                rc, _, err = self._update(hl, "DRAIN", reason)
                rows.append(f"{rc}\t{hl}\t{err.strip()}\n")
            return 0, "".join(rows), ""
        args = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))
        if argv[0] == "sinfo":
            assert argv[1:] == ["-h", "-N", "-o", "%N %T %E"], argv
            busy = {j.node for j in self.jobs.values() if j.state == "RUNNING"}
            text = "".join(
                f"{n} {self.state_of(n, busy)} {self.nodes[n]['reason'] or 'none'}\n"
                for n in sorted(self.nodes)
            )
            return 0, text, ""
        if argv[0] == "squeue":
            show_hidden = "--all" in argv or "-a" in argv
            part = argv[argv.index("-p") + 1] if "-p" in argv else None
            rows = [
                f"{j.id}|{j.name}|{j.state}|{j.node if j.state == 'RUNNING' else ''}\n"
                for j in sorted(self.jobs.values(), key=lambda j: int(j.id))
                if (part is None or j.partition == part) and (show_hidden or j.partition not in HIDDEN)
            ]
            return 0, "".join(rows), ""
        if argv[0] == "sbatch":
            return self._sbatch(argv)
        if argv[0] == "scancel":
            for job_id in argv[1:]:
                if job_id in self.jobs:
                    self.end_job(self.jobs[job_id], "CANCELLED")
            return 0, "", ""
        if argv[:3] == ["scontrol", "show", "reservation"]:
            if not self.reservations:
                return 0, "No reservations in the system\n", ""
            return (
                0,
                "".join(
                    f"ReservationName={r} StartTime=2026-12-05T01:00:00 EndTime=2027-12-05T01:00:00 Duration=UNLIMITED\n"
                    f"   Nodes={compress_hostlist(nodes)} NodeCnt={len(nodes)} Flags=MAINT,IGNORE_JOBS,SPEC_NODES\n"
                    "   Users=root State=ACTIVE\n\n"
                    for r, nodes in self.reservations.items()
                ),
                "",
            )
        if argv[:3] == ["scontrol", "create", "reservation"]:
            name = args["ReservationName"]
            assert (
                name not in self.reservations and "Flags=MAINT,IGNORE_JOBS" in argv and "Users=root" in argv
            )
            self.reservations[name] = expand_hostlist(args["Nodes"])
            return 0, f"Reservation created: {name}\n", ""
        if argv[:2] == ["scontrol", "delete"]:
            self.reservations.pop(args["ReservationName"], None)
            self._schedule()
            return 0, "", ""
        if argv[:2] == ["scontrol", "update"] and "ReservationName" in args:
            self.reservations[args["ReservationName"]] = expand_hostlist(args["Nodes"])
            self._schedule()
            return 0, "Reservation updated.\n", ""
        if argv[:2] == ["scontrol", "update"]:
            return self._update(args["NodeName"], args["State"], args.get("Reason", ""))
        return 127, "", f"{argv[0]}: command not found\n"

    def _update(self, hostlist: str, state: str, reason: str) -> tuple[int, str, str]:
        for name in expand_hostlist(hostlist):
            node = self.nodes.get(name)
            if node is None:
                return 1, "", f"slurm_update error: Invalid node name specified ({name})\n"
            if state == "DRAIN":
                node["drain"], node["reason"] = True, reason
            elif state == "RESUME":
                if not node["drain"]:
                    return 1, "", f"slurm_update error: Invalid node state specified ({name})\n"
                node["drain"], node["reason"] = False, ""
        self._schedule()
        return 0, "", ""

    def _sbatch(self, argv: list[str]) -> tuple[int, str, str]:
        opts = {}
        for a in argv[1:]:
            key, _, value = a.partition("=")
            opts[key] = value
        partition = opts.get("--partition", "batch")
        if partition == "health" and self.user != "root":
            return 1, "", "sbatch: error: Batch job submission failed: Access/permission denied\n"
        node = opts["--nodelist"]
        if node not in self.nodes:
            return (
                1,
                "",
                "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
            )
        res = opts.get("--reservation", "")
        if res and res not in self.reservations:
            return 1, "", "sbatch: error: Batch job submission failed: Requested reservation is invalid\n"
        job = self._new_job(opts["--job-name"], partition, node, self.user, res, "--no-requeue" not in opts,
                            opts["--wrap"])  # fmt: skip
        self._schedule()
        if partition == "health" and self.crash_after_sbatch is not None:
            self.crash_after_sbatch -= 1
            if self.crash_after_sbatch < 0:
                self.crash_after_sbatch = None
                raise Crash(f"killed after submitting job {job.id}")
        return 0, f"{job.id}\n", ""
