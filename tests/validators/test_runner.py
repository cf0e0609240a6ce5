"""validators/runner.py: a command and everything it starts end together (process groups)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from validators.runner import RC_TIMEOUT, run_command

pytestmark = pytest.mark.timeout(120)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent, the shell, was killed and init reaps it).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_timeout_kills_the_commands_children_too(tmp_path: Path) -> None:
    """subprocess.run(timeout=) kills only the direct child: a worker it started (here a sleep
    that has let go of the output pipes, as a spawned burn-in worker holding a GPU would) lived on."""
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 >/dev/null 2>&1 & echo $! > {pidfile}; wait"
    rc, _, err = run_command(["sh", "-c", script], 0.3)
    assert rc == RC_TIMEOUT
    assert "timed out after 0.3 s" in err and "process group" in err
    child = int(pidfile.read_text())
    assert wait_gone(child), f"the command's child {child} outlived its timeout"


def test_a_child_left_holding_the_output_does_not_hold_the_check(tmp_path: Path) -> None:
    """The command exits at once but leaves a child with its stdout open: the runner ends the
    group and returns the command's own result, not a timeout after the child's 300 s."""
    pidfile = tmp_path / "child.pid"
    rc, out, _ = run_command(["sh", "-c", f"echo done; sleep 300 & echo $! > {pidfile}"], 60.0)
    assert (rc, out.strip()) == (0, "done")
    assert wait_gone(int(pidfile.read_text()))


def test_a_daemonised_leftover_is_ended_after_a_normal_exit(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    rc, _, _ = run_command(["sh", "-c", f"sleep 300 >/dev/null 2>&1 & echo $! > {pidfile}"], 60.0)
    assert rc == 0
    assert wait_gone(int(pidfile.read_text()))


def test_not_found_and_plain_results_are_unchanged() -> None:
    assert run_command(["/nonexistent/tool"], 5)[0] == 127
    assert run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], 5) == (3, "out\n", "err\n")
