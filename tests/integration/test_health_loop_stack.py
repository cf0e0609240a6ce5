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
import time
from collections.abc import Iterator

import pytest

from tests.integration.stack import Stack, bring_up, podman, sinfo, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.long]

SERVICE = "clusterforge-health-loop.service"
TIMER = "clusterforge-health-loop.timer"
CONFIG = "/etc/clusterforge/health-loop.json"
LOOP_PYTHON = "/opt/clusterforge/venv/bin/python"
NODES = ("node-001", "node-002")
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

    def sh(self, *argv: str) -> str:
        return podman("exec", self.head, *argv)

    def round(self) -> list[dict]:
        self.sh("systemctl", "start", SERVICE)  # a oneshot: returns when the round is done
        out = podman("exec", self.head, "sh", "-c", f"cat {self.log} 2>/dev/null || true")
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        new, self.seen = lines[self.seen :], len(lines)
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


def test_the_loop_checks_idle_nodes_drains_recertifies_returns_and_replaces_a_lemon(stack: Stack) -> None:
    loop = Loop(stack)
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

    # 3. A fault between checks: found by the next scheduled check, that node alone drained, re-certified
    # once the fault is lifted, returned.
    stack.node("node-002", "apt-mark", "unhold", "slurmd")
    time.sleep(61)  # `every: 1m`: both nodes are due again
    log = loop.round()
    assert {"node-001", "node-002"} <= set(steps(log, "submitted")), log
    loop.wait_jobs_done()
    log = loop.round()
    failed = steps(log, "failed")
    assert set(failed) == {"node-002"}, log
    assert failed["node-002"]["reason"].startswith("clusterforge: software-versions: "), failed
    assert "slurmd" in failed["node-002"]["reason"], failed
    assert "node-001" in steps(log, "passed"), log
    wait_for("node-002 drained", lambda: sinfo(stack.name)["node-002"][0] == "drained", timeout=60, poll=2)
    assert sinfo(stack.name)["node-002"][1].startswith("clusterforge: software-versions: ")
    assert sinfo(stack.name)["node-001"][0] in ("idle", "allocated", "mixed")
    stack.node("node-002", "apt-mark", "hold", "slurmd")
    log = loop.round()
    recert = steps(log, "submitted")
    assert recert.get("node-002", {}).get("kind") == "recertify", log
    loop.wait_jobs_done()
    log = loop.round()
    assert steps(log, "passed").get("node-002", {}).get("kind") == "recertify", log
    assert "node-002" in steps(log, "returned"), log
    assert sinfo(stack.name)["node-002"] in (("idle", "none"), ("allocated", "none"), ("mixed", "none"))
    assert "clusterforge_health" not in loop.sh("scontrol", "show", "reservation")

    # 4. The fault left in place: three strikes in the window make a lemon, kept drained, replaced.
    loop.sh("sh", "-c", f"python3 - <<'EOF'\nimport json\np = '{CONFIG}'\nc = json.load(open(p))\n"
            "c['recertify_retry_s'] = 0\njson.dump(c, open(p, 'w'))\nEOF")  # fmt: skip  # each round retries
    old_id = _provider_id(stack, "node-002")
    stack.node("node-002", "apt-mark", "unhold", "slurmd")
    time.sleep(61)
    for _ in range(8):  # active check, drain, then re-certifications until the third strike
        log = loop.round()
        if "node-002" in steps(log, "replace-requested"):
            break
        if loop.jobs():
            loop.wait_jobs_done()
    else:
        pytest.fail("no replacement requested after 8 rounds")
    state, reason = sinfo(stack.name)["node-002"]  # drained by the failure that made it a lemon
    assert state == "drained" and reason.startswith("clusterforge: software-versions: "), reason
    assert len([s for s in loop.state()["health_strikes"] if "node-002" in json.dumps(s)]) >= 3
    assert "node-002" in json.dumps(loop.state()["replace_requested"])
    replaced = stack.cf("replace", "--requested", "--yes", timeout=2400)
    assert replaced.returncode == 0, replaced.stdout[-3000:]
    assert _provider_id(stack, "node-002") != old_id
    assert sinfo(stack.name)["node-002"] == ("idle", "none")


def _provider_id(stack: Stack, node: str) -> str:
    return podman("inspect", "-f", "{{.Id}}", f"{stack.name}-{node}").strip()
