"""The integration tests' local stack: one stack of 3 compute nodes for the whole session.

Bringing a stack up costs minutes on a 2-core machine, so every integration test file shares one
(``local_stack``, session-scoped, from tests/integration/conftest.py): the first use runs `invoke
up` and asserts every node certified; the session's end runs `invoke down` and asserts nothing of
the stack is left. A test that injects a fault must undo it and leave every node certified and
idle (``restore`` helps): the next test starts from a healthy stack. The stack gets its own name,
network and state folder (never clashes with a user's `local`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INVOKE = str(Path(sys.executable).parent / "invoke")
COMPUTE = ("node-001", "node-002", "node-003")


def cf(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [INVOKE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    sys.stdout.write(
        f"$ invoke {' '.join(args)} -> {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}\n"
    )
    return proc


def podman(*args: str) -> str:
    """The engine through the project's wrapper (its own configuration, never the machine's)."""
    from clusterforge.providers.local.engine import detect_engine

    return detect_engine("podman").run(*args, timeout=120).stdout


def sinfo(stack: str) -> dict[str, tuple[str, str]]:
    out = podman("exec", f"{stack}-head-001", "sinfo", "-h", "-N", "-o", "%N %T %E")
    rows = {}
    for line in out.splitlines():
        name, state, reason = (line.split(None, 2) + [""])[:3]
        rows[name] = (state, reason)
    return rows


COMPUTE = ("node-001", "node-002", "node-003")


@dataclass
class Stack:
    name: str
    spec: Path
    env: dict[str, str]
    state: Path
    first_up: subprocess.CompletedProcess[str] | None = None

    def cf(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return cf(*args, "--spec", str(self.spec), env=self.env, timeout=timeout)

    def status(self) -> dict[str, dict]:
        return {r["node"]: r for r in json.loads(self.cf("status", "--json").stdout)}

    def node(self, name: str, *argv: str) -> str:
        return podman("exec", f"{self.name}-{name}", *argv)

    def reservations(self) -> str:
        return podman("exec", f"{self.name}-head-001", "scontrol", "show", "reservation")

    def journal(self) -> dict:
        """The stack's journal as the library reads it (snapshot + appended log), as plain dicts."""
        from dataclasses import asdict

        from clusterforge.journal import Journal

        j = Journal(self.name, self.state.parent)
        return {"nodes": {n: asdict(r) for n, r in j.nodes.items()}, "sections": j.sections}


def wait_for(what: str, test, timeout: float = 180, poll: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = test()
        if value:
            return value
        time.sleep(poll)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def assert_serving(stack: Stack, nodes: tuple[str, ...] | list[str]) -> None:
    states = sinfo(stack.name)
    for node in nodes:
        assert states[node] == ("idle", "none"), (node, states[node])
    assert "clusterforge_cert" not in stack.reservations()  # nobody left in the hold


def bring_up(
    tmp_path_factory: pytest.TempPathFactory,
    compute: int = len(COMPUTE),
    prefix: str = "it",
    edit: Callable[[dict], None] | None = None,
) -> Iterator[Stack]:
    """Up a stack of ``compute`` compute nodes (asserting every node certified and idle), its spec
    stacks/local.yaml changed by ``edit``; down it at the end."""
    from clusterforge.providers.local.engine import detect_engine
    from tests.fixtures.nodes import _free_cidr  # the provider fixtures' free-subnet finder

    tmp_path = tmp_path_factory.mktemp(f"local-stack-{prefix}")
    name = f"{prefix}{os.getpid()}"
    spec = yaml.safe_load((ROOT / "stacks" / "local.yaml").read_text())
    spec["stack"] = name
    spec["provider"]["network_cidr"] = str(_free_cidr(detect_engine("podman")))
    for pool in spec["node_pools"]:
        if pool["role"] == "gpu":
            pool["count"] = compute
    if edit is not None:
        edit(spec)
    spec_file = tmp_path / f"{name}.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    env = dict(os.environ, CLUSTERFORGE_STATE_DIR=str(tmp_path / "state"))
    for var in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP"):
        env[var] = str(tmp_path / var.lower())
    made = Stack(name, spec_file, env, tmp_path / "state" / name)
    try:
        first = made.cf("up", timeout=2400)
        assert first.returncode == 0, "the first `invoke up` of the integration stack failed"
        made.first_up = first
        yield made
    finally:
        down = made.cf("down", "--yes", timeout=300)
        shutil.rmtree(ROOT / "inventories" / name, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    label = f"label=clusterforge.stack={name}"
    assert podman("ps", "-a", "-q", "--filter", label).strip() == ""
    assert podman("network", "ls", "-q", "--filter", label).strip() == ""
    assert podman("volume", "ls", "-q", "--filter", label).strip() == ""


@contextmanager
def background_load() -> Iterator[None]:
    """A busy machine, as CI machines are: one niced busy loop per core of this machine, for the
    duration of the block (a node's fixed share must not depend on it)."""
    loops = [
        subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])
        for _ in range(len(os.sched_getaffinity(0)))
    ]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def share_cpus(stack: Stack, node: str) -> float:
    """The CPU quota the local provider gives ``node`` of this stack (providers/local/share.py)."""
    from clusterforge.providers.local.share import node_shares
    from clusterforge.spec.loader import load_spec

    return node_shares(load_spec(stack.spec)[0])[node].cpus


def assert_shares_and_baseline(stack: Stack) -> None:
    """Each compute node runs with its share of the machine (providers/local/share.py), and the
    certification recorded the fleet's baseline: the burn-in's and the 2-node network figures."""
    from clusterforge.providers.local.nodes import current_share

    for node in COMPUTE:
        (info,) = json.loads(podman("inspect", f"{stack.name}-{node}"))
        assert current_share(info).cpus == share_cpus(stack, node), info.get("HostConfig")
    metrics = json.loads((stack.state / "baselines" / "local.json").read_text())["metrics"]
    assert any(m.startswith("matmul-burnin") for m in metrics), sorted(metrics)
    assert "network.2node.busbw" in metrics, sorted(metrics)


def restore(stack: Stack, *nodes: str) -> None:
    """Certify ``nodes`` again (after a test undid its fault) and assert the whole stack serves."""
    again = stack.cf("certify", "--nodes", ",".join(nodes))
    assert again.returncode == 0, f"{', '.join(nodes)} not certified after the fault was undone"
    assert_serving(stack, COMPUTE)
