"""The health loop on a running stack, against real Slurm (issue 28; docs/health.md).

Its own stack of 2 compute nodes with `health.active` on (the shared stack's spec has no `health`):
`up` converges the slurm role with the loop (its venv, config, oneshot service and timer, the hidden
`health` partition that user partitions preempt) and copies the baseline to shared storage. The test
stops the timer and starts the loop's own service for each round, so each step is seen; everything
else is the installed loop on the head: its `sbatch`, Slurm's preemption, the validators on the nodes.

Shown, in order: a scheduled check runs on idle nodes only (a user job on node-001 keeps it out of
the round), a check already on a node is cancelled by a user job within seconds and is journalled
`preempted` with no strike; a lost hold on node-002 is found by its next scheduled check, node-002
alone drained with the check's reason, re-certified in the loop's reservation once the fault is
lifted, and returned; the same fault left in place makes three strikes in the window: a lemon, kept
drained, its replacement requested, and `invoke replace --requested` replaces it (local provider).

`long` (opt-in): its own `up` and a dozen validator runs take longer than CI's hour has room for.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

from tests.integration.stack import Stack, bring_up, podman, share_cpus, sinfo, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.long]

SERVICE = "clusterforge-health-loop.service"
TIMER = "clusterforge-health-loop.timer"
CONFIG = "/etc/clusterforge/health-loop.json"
LOOP_PYTHON = "/opt/clusterforge/venv/bin/python"
NODES = ("node-001", "node-002")
# "<check>: <figure> <unit> ..., NN % under the baseline ..." (the loop's fleet judging, one node a round)
PERF_REASON = re.compile(
    r"^clusterforge: (matmul-burnin|gloo-allreduce): .*\d[\d.]* \S+.* % under the (fleet median|baseline)"
)
# The loop's own check, or the node's HealthCheckProgram running the same check
LOST_HOLD = re.compile(r"^clusterforge: (healthcheck: )?software-versions: .*slurmd")
JOB_S = 900  # one validators run on a capped container node: ~1-2 min; room for a slow machine


def _health_spec(spec: dict) -> None:
    spec["health"] = {
        "active": {"profile": "local", "every": "1m", "max_nodes": 2},
        "strikes": {"count": 3, "window": "7d"},
        "remediation": {"recertify_suite": "quick", "on_lemon": "replace"},
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from bring_up(tmp_path_factory, compute=len(NODES), prefix="hl", edit=_health_spec)


class Loop:
    """Rounds of the installed loop, and the steps each round added to its step log."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.head = f"{stack.name}-head-001"
        self.log = f"/shared/clusterforge-health/{stack.name}/health-loop.jsonl"
        self.seen = 0
        self.steps: list[dict] = []  # every step so far

    def sh(self, *argv: str) -> str:
        return podman("exec", self.head, *argv)

    def round(self) -> list[dict]:
        self.sh("systemctl", "start", SERVICE)  # a oneshot: returns when the round is done
        out = podman("exec", self.head, "sh", "-c", f"cat {self.log} 2>/dev/null || true")
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        new, self.seen = lines[self.seen :], len(lines)
        self.steps.extend(new)
        print("round:", *(json.dumps(s) for s in new), sep="\n  ")
        return new

    def jobs(self) -> dict[str, tuple[str, str]]:
        """The loop's jobs in the hidden partition: node -> (job id, state)."""
        out = self.sh("squeue", "--all", "-h", "-p", "health", "-o", "%i %T %j")
        rows = {}
        for line in out.splitlines():  # job names: cf-health-<active|recertify>-<node>
            job, state, name = line.split()
            rows[name.split("-", 3)[3]] = (job, state)
        return rows

    def wait_jobs_done(self) -> None:
        wait_for("the loop's jobs to end", lambda: not self.jobs(), timeout=JOB_S, poll=5)

    def state(self) -> dict:
        return json.loads(
            self.sh(LOOP_PYTHON, "-m", "clusterforge.health.loop", "--config", CONFIG, "--state")
        )

    def user_job(self, node: str, seconds: int) -> str:
        return self.sh(
            "sbatch", "--parsable", "-p", "batch", "-w", node, "--output=/dev/null", f"--wrap=sleep {seconds}"
        ).strip()


def steps(log: list[dict], step: str) -> dict[str, dict]:
    return {s["node"]: s for s in log if s["step"] == step and "node" in s}


def wait_idle(stack: Stack, node: str) -> None:
    wait_for(f"{node} idle", lambda: sinfo(stack.name)[node][0] == "idle", timeout=120, poll=2)


DUMP = """
import glob, json, os
for path in sorted(glob.glob("/shared/clusterforge-health/*/health-reports/*/*/report.json"), key=os.path.getmtime):
    data = json.load(open(path))
    for c in data.get("checks", []):
        if c["id"].startswith("matmul") or c["id"] == "gloo-allreduce":
            figures = {k: v for k, v in c.get("metrics", {}).items() if "device" in k or k == "busbw"}
            print(path.split("/")[-3], path.split("/")[-2], c["id"], c["status"], json.dumps(figures)[:300])
"""


def test_the_loop_checks_idle_nodes_drains_recertifies_returns_and_replaces_a_lemon(stack: Stack) -> None:
    loop = Loop(stack)
    try:
        _the_loop(stack, loop)
    finally:  # each job's burn-in and gloo figures, in order: what a healthy and a failed run measured
        print(loop.sh("python3", "-c", DUMP))


def _the_loop(stack: Stack, loop: Loop) -> None:
    assert loop.sh("systemctl", "is-enabled", TIMER).strip() == "enabled"
    loop.sh("systemctl", "stop", TIMER)  # the test starts each round itself

    # 1. Idle nodes only: a user job on node-001 keeps its check out of the round.
    busy = loop.user_job("node-001", 600)
    wait_for("the user job running", lambda: "RUNNING" in loop.sh("squeue", "-h", "-j", busy, "-o", "%T"))
    first = loop.round()
    assert set(steps(first, "submitted")) == {"node-002"}, first
    wait_for(
        "node-002's check running", lambda: loop.jobs().get("node-002", ("", ""))[1] == "RUNNING", timeout=120
    )
    job = loop.jobs()["node-002"][0]

    # 2. A user job takes the node from a running check within seconds (PreemptMode=CANCEL, GraceTime=0).
    started = time.monotonic()
    user = loop.user_job("node-002", 20)
    wait_for(
        "the check cancelled by the user job", lambda: "node-002" not in loop.jobs(), timeout=60, poll=0.5
    )
    wait_for("the user job running", lambda: "RUNNING" in loop.sh("squeue", "-h", "-j", user, "-o", "%T"))
    print(f"check {job} preempted {time.monotonic() - started:.1f} s after the user job's submission")
    loop.sh("scancel", busy)
    wait_idle(stack, "node-001")
    second = loop.round()
    assert "node-002" in steps(second, "preempted"), second
    assert "node-001" in steps(second, "submitted"), second  # idle now
    assert "node-002" not in steps(second, "submitted"), second  # still running the user's job
    assert loop.state()["health_strikes"] == []  # a preemption is no failure
    loop.wait_jobs_done()
    wait_idle(stack, "node-002")
    third = loop.round()
    assert "node-001" in steps(third, "passed"), third
    assert "node-002" in steps(third, "submitted"), third
    loop.wait_jobs_done()
    assert "node-002" in steps(loop.round(), "passed")

    # 3. A fault between checks, found by the next scheduled check: node-002 at half its CPU share (the
    # node's health check, every 300 s, runs no workload: only the loop's check can see it). Not two
    # thirds, as in the certification phase, where the node is judged beside the fleet: here it is judged
    # against the baseline copied from `up`, recorded while both nodes certified at once, and a 2/3 cap
    # (23.1 GFLOP/s against healthy checks' 29-34 on 2026-12-06) came inside its 25 % fail gap.
    # Lifted once its check has run: that node alone out of service with the check's figure against the
    # copied baseline, one strike, re-certified in the loop's reservation, returned.
    share = share_cpus(stack, "node-002")
    podman("update", "--cpus", f"{share / 2:.3f}", f"{stack.name}-node-002")
    time.sleep(61)  # `every: 1m`: both nodes are due again
    assert "node-002" in steps(loop.round(), "submitted")
    loop.wait_jobs_done()
    podman("update", "--cpus", f"{share:g}", f"{stack.name}-node-002")  # its share again
    failed = until(loop, lambda log: steps(log, "failed").get("node-002"), "node-002's failure")
    assert PERF_REASON.match(failed["reason"]), failed
    # out of users' reach: drained, or re-certifying in the loop's MAINT reservation (sinfo says idle there)
    held = "node-002" in loop.sh("sh", "-c", "scontrol show reservation clusterforge_health || true")
    assert held or sinfo(stack.name)["node-002"][0] == "drained", sinfo(stack.name)
    returned = until(loop, lambda log: steps(log, "returned").get("node-002"), "node-002 returned")
    assert returned["why"] == "passed its re-certification"
    assert sinfo(stack.name)["node-002"][1] == "none"
    assert "clusterforge_health" not in loop.sh("scontrol", "show", "reservation")
    assert [s["node"] for s in loop.state()["health_strikes"]] == ["node-002"]  # one fault, one strike
    assert "node-001" not in {s.get("node") for s in loop.steps if s["step"] in ("failed", "drained")}

    # 4. A lost hold, left in place: found by the loop's check or the node's health check (either may come
    # first: one strike), then failed re-certifications: three strikes in the window make a lemon.
    loop.sh("sh", "-c", f"python3 - <<'EOF'\nimport json\np = '{CONFIG}'\nc = json.load(open(p))\n"
            "c['health']['remediation']['recertify_retry'] = '1s'\njson.dump(c, open(p, 'w'))\nEOF")  # fmt: skip  # each round retries
    old_id = _provider_id(stack, "node-002")
    stack.node("node-002", "apt-mark", "unhold", "slurmd")
    time.sleep(61)
    until(
        loop, lambda log: steps(log, "replace-requested").get("node-002"), "node-002's replacement requested"
    )
    state, reason = sinfo(stack.name)["node-002"]  # drained by the failure that made it a lemon
    assert state == "drained" and LOST_HOLD.match(reason), reason
    assert [s["node"] for s in loop.state()["health_strikes"]] == ["node-002"] * 3
    assert "node-002" in json.dumps(loop.state()["replace_requested"])
    replaced = stack.cf("replace", "--requested", "--yes", timeout=2400)
    assert replaced.returncode == 0, replaced.stdout[-3000:]
    assert _provider_id(stack, "node-002") != old_id
    assert sinfo(stack.name)["node-002"] == ("idle", "none")


def until(loop: Loop, found, what: str, rounds: int = 8):
    """Rounds (each after the loop's jobs ended) until ``found(steps of the round)`` says something."""
    for _ in range(rounds):
        value = found(loop.round())
        if value:
            return value
        loop.wait_jobs_done()
    pytest.fail(f"{what}: not after {rounds} rounds")


def _provider_id(stack: Stack, node: str) -> str:
    return podman("inspect", "-f", "{{.Id}}", f"{stack.name}-{node}").strip()
