"""The loop's Slurm commands (argv) and the parsers of what they print: pure, tested on fakes.

Jobs are named ``cf-health-<kind>-<node>`` (kind ``active`` or ``recertify``) so that a round adopts
the jobs an earlier, killed round submitted instead of submitting twice. The health partition is
hidden: squeue lists its jobs only with ``--all`` (squeue(1) ``-a``: "information about partitions that
are configured as hidden").
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["active", "recertify"]
KINDS: tuple[Kind, ...] = ("active", "recertify")
JOB_PREFIX = "cf-health-"
SQUEUE_FORMAT = "%i|%j|%T|%N"
RC_FILE = "rc"  # written by the job's script when the validators exit by themselves
# The node's lock the validators run holds by default (the role writes its slurm_validators_lock into the
# loop's config as validators_lock; the defaults are held equal by a test): the
# node's health check takes it without waiting and leaves its quick checks out while it is held, and the
# job waits up to LOCK_WAIT_S for a health check already running (Slurm gives one 60 s).
VALIDATORS_LOCK = "/run/lock/clusterforge-validators.lock"
LOCK_WAIT_S = 90


@dataclass(frozen=True)
class HealthJob:
    job_id: str
    kind: Kind
    node: str
    state: str  # PENDING, RUNNING, COMPLETING, ...

    @property
    def tag(self) -> str:
        """What the journal's ``certifying`` field holds while the job runs."""
        return f"{self.kind}:{self.job_id}"


def job_name(kind: Kind, node: str) -> str:
    return f"{JOB_PREFIX}{kind}-{node}"


def parse_tag(tag: str) -> tuple[str, str]:
    """``active:123`` -> ("active", "123"); anything else -> ("", "")."""
    kind, _, job = tag.partition(":")
    return (kind, job) if kind in ("active", "recertify") and job else ("", "")


def squeue_argv(partition: str) -> list[str]:
    return ["squeue", "--all", "-h", "-p", partition, "-o", SQUEUE_FORMAT]


def parse_squeue(text: str) -> dict[str, HealthJob]:
    """The loop's own jobs by node (other jobs in the partition are not the loop's: skipped)."""
    jobs: dict[str, HealthJob] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 3 or not parts[1].startswith(JOB_PREFIX):
            continue
        rest = parts[1][len(JOB_PREFIX) :]
        kind, _, node = rest.partition("-")
        if not node:
            continue
        for known in KINDS:
            if kind == known:
                jobs[node] = HealthJob(parts[0].strip(), known, node, parts[2].strip().upper())
    return jobs


def job_dir(reports_dir: Path, node: str, job_id: str) -> Path:
    return reports_dir / node / job_id


def job_script(
    validators: Sequence[str],
    suite: str,
    node_config: str,
    reports_dir: Path,
    node: str,
    lock: str = VALIDATORS_LOCK,
) -> str:
    """The batch script (sh): the validators write report.json into the job's folder on shared storage,
    then the exit status goes to ``rc``. A job killed by preemption never writes ``rc``. The run holds
    ``lock`` (fd 9, inherited by the validators), after waiting up to LOCK_WAIT_S for a health check that
    holds it; past that, or where the lock cannot be opened, it runs without (a check never waits forever)."""
    out = f"{shlex.quote(str(reports_dir / node))}/$SLURM_JOB_ID"
    run = " ".join(shlex.quote(a) for a in [*validators, "run", "--profile", suite, "--config", node_config])
    validate = f'{run} --out "$d"; echo $? > "$d/{RC_FILE}"'
    if not lock:
        return f'd={out}; mkdir -p "$d" && {{ {validate}; }}'
    return (
        # "true": only a lock file that cannot be opened runs the fallback, never a second run
        f'd={out}; mkdir -p "$d" && {{ {{ flock -w {LOCK_WAIT_S} 9; {validate}; true; }} 9>>{shlex.quote(lock)}'
        f" || {{ {validate}; }}; }}"
    )


def sbatch_argv(
    kind: Kind,
    node: str,
    partition: str,
    script: str,
    time_limit_min: int,
    reservation: str = "",
) -> list[str]:
    argv = [
        "sbatch", "--parsable", f"--partition={partition}", f"--nodelist={node}", "--nodes=1",
        "--exclusive", "--no-requeue", f"--job-name={job_name(kind, node)}", f"--time={time_limit_min}",
        "--output=/dev/null",
    ]  # fmt: skip
    if reservation:
        argv.append(f"--reservation={reservation}")
    return [*argv, f"--wrap={script}"]


def parse_sbatch(out: str) -> str:
    """``--parsable`` prints ``<job id>[;<cluster>]``."""
    first = out.strip().splitlines()[0] if out.strip() else ""
    return first.split(";", 1)[0].strip()


def scancel_argv(job_ids: Sequence[str]) -> list[str]:
    return ["scancel", *job_ids]
