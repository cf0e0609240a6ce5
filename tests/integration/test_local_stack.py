"""The whole line on real containers, on the session's 3-compute-node stack, in order: `invoke up`
admitted every node and a second `up` changes nothing; one command at a time per stack (a second
is refused naming the holder, a killed holder's lock is taken over); a node whose slurmd stopped
is drained alone; a node whose pinned package drifted is drained by `invoke certify` with the
failing check as the reason while the others stay idle (then repaired by `up`).

Each fault test asserts both halves: the faulted node drained with the right reason, every other
node idle and out of the certification hold; and it leaves the stack healthy for the next test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.integration.stack import (
    COMPUTE,
    INVOKE,
    ROOT,
    Stack,
    assert_serving,
    assert_shares_and_baseline,
    podman,
    sinfo,
    wait_for,
)

pytestmark = pytest.mark.integration

# Replace node-002's slurmd by the same build relabelled 22.05.7-1: a pinned package at another
# version (what an unattended upgrade or a hand-installed .deb does), slurmd itself still works.
DRIFT = r"""
set -e
cd /var/tmp
deb=$(ls /var/cache/apt/archives/slurmd_*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then apt-get download slurmd >/dev/null; deb=$(ls slurmd_*.deb | head -n1); fi
rm -rf drift && dpkg-deb -R "$deb" drift
sed -i 's/^Version: .*/Version: 22.05.7-1/' drift/DEBIAN/control
dpkg-deb -b drift slurmd-drift.deb >/dev/null
dpkg -i --force-downgrade --force-hold slurmd-drift.deb >/dev/null
dpkg-query -W -f='${Version}' slurmd
"""


@pytest.mark.fresh_stack
def test_up_admits_every_node_and_a_second_up_changes_nothing(local_stack: Stack) -> None:
    assert local_stack.first_up is not None and local_stack.first_up.returncode == 0
    rows = local_stack.status()
    for node in COMPUTE:
        assert rows[node]["certification"] == "certified", rows[node]
        assert rows[node]["slurm_state"] == "idle", rows[node]
    assert {n: s for n, (s, _) in sinfo(local_stack.name).items()} == dict.fromkeys(COMPUTE, "idle")
    assert_shares_and_baseline(local_stack)
    certified_at = {n: rows[n]["certified_at"] for n in COMPUTE}

    second = local_stack.cf("up")
    assert second.returncode == 0
    assert "Ansible changes: 0;" in second.stdout
    rows = local_stack.status()
    assert {n: rows[n]["certified_at"] for n in certified_at} == certified_at  # nothing re-certified


# Opt-in (`--marks long`) since 2026-12-05, to keep CI under the hour (185 s in that day's first rehearsal;
# in the second, `up` after the kill returned 1 with every node's report a pass: cause not found yet): the lock itself is tested in tests/test_lock.py, and a suite left running
# by a killed run in tests/playbooks/test_certify_stale_suite.py (containers phase).
@pytest.mark.long
def test_one_command_per_stack_and_a_killed_holders_lock_is_taken_over(local_stack: Stack) -> None:
    lock = local_stack.state / "lock"
    first = subprocess.Popen(
        [INVOKE, "certify", "--spec", str(local_stack.spec)],
        cwd=ROOT, env=local_stack.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the kill below takes all of it
    )  # fmt: skip
    try:
        holder = wait_for("certify to take the lock", lambda: lock.exists() and lock.read_text().strip(), 120)
        record = json.loads(holder)
        assert record["pid"] == first.pid and record["command"].startswith("invoke certify")
        for command in ("up", "certify", "down"):
            refused = local_stack.cf(command, *(["--yes"] if command == "down" else []), timeout=120)
            assert refused.returncode == 2, (command, refused.stderr)
            assert f"stack {local_stack.name!r} is busy" in refused.stderr
            assert f"pid {first.pid}" in refused.stderr and "invoke certify" in refused.stderr
        assert (
            len(podman("ps", "-q", "--filter", f"label=clusterforge.stack={local_stack.name}").split()) == 4
        )
        # Cut the certification short while it holds the nodes, as a crash or OOM kill would.
        wait_for(
            "the nodes to be held",
            lambda: any("$" in s or s == "maint" for s, _ in sinfo(local_stack.name).values()),
            300,
        )
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
    after = local_stack.cf("up")
    assert after.returncode == 0
    assert "taking over the lock left by `invoke certify" in after.stderr
    assert f"pid {first.pid}" in after.stderr
    assert lock.read_text() == ""  # released cleanly
    assert_serving(local_stack, COMPUTE)  # the cut-short certification was done again, nobody left held


# Opt-in (`--marks long`) until run whole: the drain-alone half passed here twice (reason, others
# idle, nobody held), the slurmd-restarted half has not run yet (README, Tests).
@pytest.mark.long
def test_a_node_whose_slurmd_stopped_is_drained_alone(local_stack: Stack) -> None:
    local_stack.node("node-002", "systemctl", "stop", "slurmd")
    started = time.monotonic()
    run = local_stack.cf("certify", timeout=900)  # the network job's whole-life deadline is within this
    took = time.monotonic() - started
    sys.stdout.write(f"certify with a silent slurmd took {took:.0f} s\n")
    assert run.returncode == 1
    states = sinfo(local_stack.name)
    # DRAIN either way: "draining" while the probe job stays COMPLETING on the silent node (Slurm
    # keeps it until the node answers; measured here), "drained" once nothing runs there.
    assert states["node-002"][0].rstrip("*$") in ("drained", "draining"), states  # `*`: not responding
    reason = states["node-002"][1]
    assert reason.startswith("clusterforge: slurmd-responding:") and "slurmd" in reason, reason
    assert_serving(local_stack, ["node-001", "node-003"])
    # Back: slurmd started, the node certified again on its own and admitted.
    local_stack.node("node-002", "systemctl", "start", "slurmd")
    again = local_stack.cf("certify", "--nodes", "node-002")
    assert again.returncode == 0
    assert_serving(local_stack, COMPUTE)


# Opt-in (`--marks long`): not yet run since `up` skips nodes on their digest (README, Tests).
@pytest.mark.long
def test_a_drifted_pinned_package_drains_that_node_only(local_stack: Stack) -> None:
    drifted = local_stack.node("node-002", "sh", "-c", DRIFT).strip()
    assert drifted == "22.05.7-1"
    recert = local_stack.cf("certify")
    assert recert.returncode == 1  # a node failed
    states = sinfo(local_stack.name)
    assert states["node-002"][0] == "drained"
    assert states["node-002"][1].startswith("clusterforge: software-versions:"), states["node-002"]
    assert "22.05.7" in states["node-002"][1]
    assert_serving(local_stack, ["node-001", "node-003"])
    report = json.loads((local_stack.state / "reports" / "node-002" / "report.json").read_text())
    assert report["verdict"] == "fail"
    # `up` repairs the drift (the pinned version again) and certifies the node again.
    repaired = local_stack.cf("up")
    assert repaired.returncode == 0
    assert local_stack.node("node-002", "dpkg-query", "-W", "-f=${Version}", "slurmd").startswith("22.05.8")
    assert_serving(local_stack, COMPUTE)
