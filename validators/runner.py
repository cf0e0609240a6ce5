"""The command runner every check receives: ``(argv, timeout) -> (rc, stdout, stderr)``.

Injected so tests hand checks captured tool output instead of running the tools. The real one
never raises for the usual failures: a missing binary is rc 127 with a "not found" message
(as a shell would say), a timeout is rc 124.
"""

from __future__ import annotations

import os
import subprocess
from typing import Callable, Optional, Sequence, Tuple

RunResult = Tuple[int, str, str]
Runner = Callable[[Sequence[str], float], RunResult]

RC_NOT_FOUND = 127
RC_TIMEOUT = 124


def run_command(argv: Sequence[str], timeout: float, env: Optional[dict] = None) -> RunResult:
    """Run ``argv`` without a shell; return (rc, stdout, stderr) as text."""
    try:
        proc = subprocess.run(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        return RC_NOT_FOUND, "", f"{argv[0]}: command not found"
    except PermissionError as exc:
        return 126, "", f"{argv[0]}: cannot execute: {exc.strerror}"
    except subprocess.TimeoutExpired as exc:
        out = _text(exc.stdout)
        return RC_TIMEOUT, out, f"{argv[0]}: timed out after {timeout:g} s"
    return proc.returncode, _text(proc.stdout), _text(proc.stderr)


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
