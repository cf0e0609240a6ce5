"""Drift on the shared local stack: a converged `up` skips every node; a managed config file
edited on one node and a pinned package's hold removed on another make the next `up` converge
exactly those two, repair both, and leave the others alone. Ends with the stack healthy (the
two repaired nodes are re-certified by that same `up`, their certification being stale)."""

from __future__ import annotations

import json
import time

import pytest

from tests.integration.stack import COMPUTE, Stack, assert_serving, cf

# Opt-in (`invoke test --marks long`): green here on 2026-12-01 (drift + rollout, 33.6 min alone), but CI's time has no room (README, Development).
pytestmark = [pytest.mark.integration, pytest.mark.long]

NODES = ("head-001", *COMPUTE)
EDITED = ("node-001", "/etc/default/slurmd")  # the slurm role's compute defaults file
UNHELD = ("node-002", "slurmd")  # held at the spec's version by the slurm role


def drift(stack: Stack) -> dict[str, dict]:
    proc = stack.cf("drift", "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return {row["node"]: row for row in json.loads(proc.stdout)}


def baselines(stack: Stack) -> dict[str, str]:
    journal = stack.journal()
    return {n: journal["nodes"][n].get("drift", {}).get("at", "") for n in NODES}


def wide_up(stack: Stack) -> tuple[int, str, float]:
    start = time.perf_counter()
    proc = cf("up", "--spec", str(stack.spec), env={**stack.env, "COLUMNS": "300"})
    return proc.returncode, proc.stdout, time.perf_counter() - start


def test_next_up_converges_exactly_the_two_drifted_nodes(local_stack: Stack) -> None:
    if any(row["converge"] for row in drift(local_stack).values()):
        rc, out, _ = wide_up(local_stack)  # an earlier test left something to converge
        assert rc == 0, out
    rows = drift(local_stack)
    assert not any(r["converge"] for r in rows.values()), rows
    rc, out, seconds = wide_up(local_stack)
    assert rc == 0, out
    for node in NODES:
        assert any(node in line and "unchanged since" in line for line in out.splitlines()), out
    print(f"converged up with every node skipped: {seconds:.1f} s")

    node, path = EDITED
    before = local_stack.node(node, "sha256sum", path).split()[0]
    local_stack.node(node, "sh", "-c", f"echo '# edited by hand' >> {path}")
    local_stack.node(UNHELD[0], "apt-mark", "unhold", UNHELD[1])
    rows = drift(local_stack)
    assert {n for n, r in rows.items() if r["converge"]} == {EDITED[0], UNHELD[0]}, rows
    assert f"file {path}: content changed" in rows[EDITED[0]]["changes"]
    assert f"package {UNHELD[1]}: hold removed" in rows[UNHELD[0]]["changes"]

    at_before = baselines(local_stack)
    rc, out, seconds = wide_up(local_stack)
    assert rc == 0, out
    print(f"up repairing two nodes: {seconds:.1f} s")
    at_after = baselines(local_stack)
    converged = {n for n in NODES if at_after[n] != at_before[n]}
    assert converged == {EDITED[0], UNHELD[0]}, (at_before, at_after)
    assert any(EDITED[0] in line and "drift: file" in line for line in out.splitlines()), out
    assert local_stack.node(node, "sha256sum", path).split()[0] == before  # repaired
    held = local_stack.node(UNHELD[0], "apt-mark", "showhold")
    assert UNHELD[1] in held.split(), held  # hold back
    assert not any(r["converge"] for r in drift(local_stack).values())
    assert_serving(local_stack, COMPUTE)
