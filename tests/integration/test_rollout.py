"""`invoke upgrade` and `invoke replace` on the shared local stack (tests/integration/stack.py).

The pinned component changed is the NVIDIA driver userland the local stack really installs from
Debian 12 non-free (roles/nvidia_driver, source distro): 535.261.03 in bookworm and 535.309.01 in
bookworm-security (docs/INTERFACES.md, gpu roles; checked on the node with `apt-cache policy`
before the test relies on it). The stack is upgraded node by node while a user job runs on the
first node. The way back to the spec's version is the failing rollout: its second batch's node
fails re-certification (a fault hook), so the rollout stops there with that node drained with the
check's reason, the first batch back at the spec's version and the third untouched and serving.
These are the last tests on the shared stack (file order; the session downs it after them).
"""

from __future__ import annotations

import pytest
import yaml

from tests.integration.stack import COMPUTE, Stack, assert_serving, podman, sinfo, wait_for

# Opt-in (`invoke test --marks long`): green here on 2026-12-01 (drift + rollout, 33.6 min alone), but CI's time has no room (README, Development).
pytestmark = [pytest.mark.integration, pytest.mark.long]

OLD, NEW = "535.261.03", "535.309.01"
PACKAGE = "nvidia-smi"  # one of the pinned userland packages (roles/nvidia_driver/vars/Debian-12.yml)


def installed(stack: Stack, node: str) -> str:
    return stack.node(node, "dpkg-query", "-W", "-f", "${Version}", PACKAGE).strip()


def journal(stack: Stack) -> dict:
    return stack.journal()


def set_driver(stack: Stack, text: str, version: str) -> None:
    spec = yaml.safe_load(text)
    spec["software"]["driver"]["version"] = version
    spec["rollout"] = {"max_unavailable": 1, "drain_timeout_s": 900}
    stack.spec.write_text(yaml.safe_dump(spec, sort_keys=False))


def job_state(stack: Stack, job: str) -> str:
    """The job's state; "" once slurmctld has purged it (MinJobAge, 300 s by default)."""
    from clusterforge.providers.local.engine import detect_engine

    proc = detect_engine("podman").run(
        "exec", f"{stack.name}-head-001", "scontrol", "show", "job", job, check=False, timeout=60
    )
    return next((w.split("=", 1)[1] for w in proc.stdout.split() if w.startswith("JobState=")), "")


@pytest.mark.timeout(3600)  # a rolling pass over 3 nodes on 2 cores
def test_rolling_driver_upgrade_one_node_at_a_time_keeps_a_running_job(local_stack: Stack) -> None:
    stack = local_stack
    policy = stack.node("node-001", "apt-cache", "policy", PACKAGE)
    if NEW not in policy:
        pytest.skip(f"{PACKAGE} {NEW} is not in the node's apt sources any more:\n{policy}")
    original = stack.spec.read_text()
    assert yaml.safe_load(original)["software"]["driver"]["version"] == OLD
    assert all(installed(stack, n).startswith(OLD) for n in COMPUTE)
    set_driver(stack, original, NEW)
    try:
        job = stack.node(
            "head-001", "sbatch", "--parsable", "-w", "node-001", "-o", "/var/tmp/rollout-job-%j.out",
            "--wrap", "sleep 60; echo finished",
        ).strip()  # fmt: skip
        wait_for("the user job to run on node-001", lambda: job_state(stack, job) == "RUNNING", timeout=120)
        up = stack.cf("upgrade", "--yes", timeout=3600)
        assert up.returncode == 0, "the rolling upgrade failed"
        text = " ".join(up.stdout.split())
        marks = [text.index(f"batch {i}: draining node-00{i}") for i in (1, 2, 3)]
        assert marks == sorted(marks), "nodes were not drained one at a time, in order"
        # The job was not killed: it ran to its end before node-001 was converged.
        assert stack.node("node-001", "cat", f"/var/tmp/rollout-job-{job}.out").strip() == "finished"
        assert job_state(stack, job) in ("COMPLETED", "")  # "" once Slurm forgot it (MinJobAge)
        for node in COMPUTE:
            assert installed(stack, node).startswith(NEW), node
        records = journal(stack)["nodes"]
        assert {n: records[n]["versions"]["nvidia_driver_version"] for n in COMPUTE} == dict.fromkeys(
            COMPUTE, NEW
        )
        assert all(r["certification"] == "certified" for n, r in stack.status().items() if n in COMPUTE)
        assert_serving(stack, COMPUTE)
    finally:
        stack.spec.write_text(original)


@pytest.mark.timeout(3600)
def test_a_rollout_whose_second_batch_fails_recertification_stops_there(local_stack: Stack) -> None:
    stack = local_stack
    if not all(installed(stack, n).startswith(NEW) for n in COMPUTE):
        pytest.skip("needs the stack the rolling upgrade above left at the new driver")
    original = stack.spec.read_text()
    set_driver(stack, original, OLD)  # back to the spec's version, batch 1 per node again
    hook = "mkdir -p /etc/clusterforge/faults && echo 0 > /etc/clusterforge/faults/nondeterministic"
    stack.node("node-002", "sh", "-c", hook)
    try:
        run = stack.cf("upgrade", "--yes", timeout=3000)
    finally:
        stack.node("node-002", "rm", "-f", "/etc/clusterforge/faults/nondeterministic")
        stack.spec.write_text(original)
    assert run.returncode != 0, "a rollout with a failed batch must not exit 0"
    assert "rollout stopped: batch 2: node-002 failed" in " ".join(run.stdout.split()), run.stdout
    states = sinfo(stack.name)
    assert states["node-002"][0] == "drained", states
    assert states["node-002"][1].startswith("clusterforge: matmul-burnin: "), states["node-002"]
    assert installed(stack, "node-001").startswith(OLD)  # batch 1 went through
    assert installed(stack, "node-003").startswith(NEW)  # batch 3 never touched
    assert_serving(stack, ["node-001", "node-003"])
    records = journal(stack)["nodes"]
    assert records["node-003"]["versions"]["nvidia_driver_version"] == NEW  # status shows the mix
    assert records["node-001"]["versions"]["nvidia_driver_version"] == OLD
    again = stack.cf("certify", "--nodes", "node-002")  # fault gone: the node serves again
    assert again.returncode == 0
    assert_serving(stack, COMPUTE)


def container_id(stack: Stack, node: str) -> str:
    return podman("inspect", "-f", "{{.Id}}", f"{stack.name}-{node}").strip()


@pytest.mark.timeout(2700)
def test_replace_gives_a_node_a_new_container_certified_and_admitted(local_stack: Stack) -> None:
    stack = local_stack
    before = container_id(stack, "node-003")
    proc = stack.cf("replace", "--node", "node-003", "--yes", timeout=2400)
    assert proc.returncode == 0, "invoke replace failed"
    after = container_id(stack, "node-003")
    assert after != before
    entry = journal(stack)["sections"]["replacements"][-1]
    assert (entry["node"], entry["old"]["provider_id"], entry["new"]["provider_id"]) == (
        "node-003",
        before,
        after,
    )
    row = stack.status()["node-003"]
    assert row["certification"] == "certified" and row["provider_state"] == "running"
    assert installed(stack, "node-003").startswith(OLD)
    assert_serving(stack, COMPUTE)
