"""The command runner every check receives: ``(argv, timeout) -> (rc, stdout, stderr)``.

Injected so tests hand checks captured tool output instead of running the tools. The real one
never raises for the usual failures: a missing binary is rc 127 with a "not found" message
(as a shell would say), a timeout is rc 124.

Every command starts in its own session (``setsid``), so it and everything it starts (the
workers of a burn-in, the ranks of a launcher) form one process group that is ended whole:
at the timeout, and also when the command itself has exited but left processes behind.
``subprocess.run(timeout=...)`` kills only the direct child (CPython Lib/subprocess.py: on
TimeoutExpired ``process.kill()``), so a worker left holding a GPU would outlive the check and
load the next one's devices.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable, Optional, Sequence, Tuple

RunResult = Tuple[int, str, str]
Runner = Callable[[Sequence[str], float], RunResult]

RC_NOT_FOUND = 127
RC_TIMEOUT = 124
# A timed-out group gets SIGTERM first, so a launcher (srun, mpirun) can pass it on to its remote
# ranks, then SIGKILL after this many seconds.
KILL_GRACE_S = 5.0
# How often the runner looks whether the command has exited while something it started still
# holds its output open.
_POLL_S = 0.5


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a process group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its user: nothing this suite may signal
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether a process of the group is still running. Zombies do not count: a killed worker
    whose parent is gone waits for init to reap it (some container inits never do)."""
    if not signal_group(pgid, 0):
        return False
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc: the signal's answer is all there is
        return True
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        # fields after the command name: state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def end_group(
    pgid: int, grace: float = KILL_GRACE_S, proc: Optional["subprocess.Popen[bytes]"] = None
) -> None:
    """SIGTERM the group, wait up to ``grace`` seconds for it to go, then SIGKILL what is left.
    ``proc``, the group's leader when it is our child, is reaped meanwhile (else it stays a zombie)."""
    if not signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc is not None:
            proc.poll()
        if not group_alive(pgid):
            return
        time.sleep(0.1)
    signal_group(pgid, signal.SIGKILL)


def run_command(argv: Sequence[str], timeout: float, env: Optional[dict] = None) -> RunResult:
    """Run ``argv`` without a shell in its own session; return (rc, stdout, stderr) as text."""
    try:
        proc = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError:
        return RC_NOT_FOUND, "", f"{argv[0]}: command not found"
    except PermissionError as exc:
        return 126, "", f"{argv[0]}: cannot execute: {exc.strerror}"
    out, err, timed_out = _communicate(proc, timeout)
    if timed_out:
        return (
            RC_TIMEOUT,
            _text(out),
            f"{argv[0]}: timed out after {timeout:g} s (its process group was killed)",
        )
    return proc.returncode, _text(out), _text(err)


def _communicate(proc: "subprocess.Popen[bytes]", timeout: float) -> Tuple[bytes, bytes, bool]:
    """Read the command's output until it and its group are done, or until ``timeout``.

    A command that exits while its children still hold stdout open would keep ``communicate``
    waiting for them: once the command has exited, its group is ended and its output read."""
    deadline = time.monotonic() + timeout
    ended = False
    while True:
        left = deadline - time.monotonic()
        try:
            out, err = proc.communicate(timeout=max(0.01, min(_POLL_S, left)))
            break
        except subprocess.TimeoutExpired:
            if left <= 0:
                end_group(proc.pid, proc=proc)
                return (*_drain(proc), True)
            if proc.poll() is not None and not ended:
                end_group(proc.pid, proc=proc)  # the command is done; what it left behind is not
                ended = True
    end_group(proc.pid, grace=1.0)  # a daemonised leftover that closed its output
    return out or b"", err or b"", False


def _drain(proc: "subprocess.Popen[bytes]") -> Tuple[bytes, bytes]:
    try:
        out, err = proc.communicate(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:  # a process outside the group (its own session) holds the pipes
        proc.kill()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        proc.wait()
        return b"", b""
    return out or b"", err or b""


def _text(data: object) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return str(data)


def first_line(stdout: str, stderr: str) -> str:
    """The first non-empty line a failed tool printed, stdout first (nvidia-smi writes its
    errors there), for a one-line reason."""
    for text in (stdout, stderr):
        for line in text.splitlines():
            if line.strip():
                return line.strip()
    return "(no output)"


def describe_failure(argv: Sequence[str], rc: int, stdout: str, stderr: str) -> str:
    """``nvidia-smi failed (rc 9): NVIDIA-SMI has failed because ...``."""
    name = os.path.basename(argv[0]) if argv else "?"
    if rc == RC_NOT_FOUND:
        return f"{name} not found: {first_line(stdout, stderr)}"
    return f"{name} failed (rc {rc}): {first_line(stdout, stderr)}"
