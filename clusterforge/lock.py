"""One operation per stack at a time: an exclusive lock under ``.clusterforge/<stack>/lock``.

Every command that changes a stack (`up`, `certify`, `down`, and later ones) holds it for its
whole run. The lock is an ``flock`` on the file, so the kernel releases it when the holder
dies however it dies (``kill -9`` included): there is no stale-lock guessing by pid. The file
also records who holds it (pid, host, command, start time) so that a refused command can say
who and since when. A holder that exits cleanly empties the file; a file that still names a
holder while no process holds the flock was left by a process that died, and the next command
takes it over with a one-line note.

A lock file that is unreadable, or that holds something other than a clusterforge lock record,
is never ignored: the command stops and says which file it is and how to clear it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from clusterforge.journal import stack_dir
from clusterforge.waiting import wait_until

LOCK_KIND = "clusterforge-stack-lock"
LOCK_VERSION = 1


@dataclass(frozen=True)
class Holder:
    """Who holds (or last held) a stack's lock."""

    pid: int
    host: str
    command: str
    started: str  # ISO 8601, UTC

    def describe(self, now: datetime | None = None) -> str:
        return f"`{self.command}` (pid {self.pid} on {self.host}, since {self.started}, {ago(self.started, now)})"


class LockError(Exception):
    """The lock cannot be taken: held by another command, or the lock file is not usable."""

    def __init__(self, message: str, holder: Holder | None = None):
        super().__init__(message)
        self.holder = holder


class StackLocked(LockError):
    """Another command holds the stack's lock."""


def ago(iso: str, now: datetime | None = None) -> str:
    """``"12 min ago"`` for an ISO time; the text itself when it does not parse."""
    try:
        then = datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return iso or "at an unknown time"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - then).total_seconds()))
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min ago"
    return f"{seconds // 86400} d ago"


def lock_path(stack: str) -> Path:
    return stack_dir(stack) / "lock"


def _clear_hint(path: Path) -> str:
    return f"if no clusterforge command is running on this stack, remove it (rm {path}) and run again"


def read_holder(path: Path) -> Holder | None:
    """The holder recorded in ``path``: None for an empty or missing file; LockError if foreign."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(f"lock file {path} cannot be read ({exc}); {_clear_hint(path)}") from None
    if not text.strip():
        return None
    try:
        data = json.loads(text)
        if data.get("kind") != LOCK_KIND:
            raise ValueError(f"kind {data.get('kind')!r}, expected {LOCK_KIND!r}")
        return Holder(int(data["pid"]), str(data["host"]), str(data["command"]), str(data["started"]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LockError(
            f"lock file {path} is not a clusterforge lock record ({exc}); {_clear_hint(path)}"
        ) from None


def _open(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise LockError(f"lock file {path} cannot be opened ({exc.strerror}); {_clear_hint(path)}") from None


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise
    return True


def _write(fd: int, holder: Holder) -> None:
    record = {"kind": LOCK_KIND, "version": LOCK_VERSION, **asdict(holder)}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
    os.fsync(fd)


@contextmanager
def stack_lock(
    stack: str,
    command: str,
    *,
    wait: bool = False,
    poll_s: float = 1.0,
    note: Callable[[str], None] = print,
    path: Path | None = None,
) -> Iterator[Holder]:
    """Hold ``stack``'s lock for the body; raise StackLocked at once if held (or wait, with ``wait``)."""
    path = path or lock_path(stack)
    fd = _open(path)
    try:
        if not _try_flock(fd):
            holder = _holder_or_none(path)
            who = holder.describe() if holder else "another clusterforge command (no record yet)"
            if not wait:
                raise StackLocked(
                    f"stack {stack!r} is busy: {who} holds its lock ({path}); "
                    "wait for it to finish, or run again with --wait",
                    holder,
                )
            note(f"stack {stack!r} is busy: {who}; waiting for it (--wait)")
            wait_until(lambda: _try_flock(fd), timeout_s=None, poll_s=poll_s, pause_first=True)
        try:
            previous = read_holder(path)
        except LockError:
            fcntl.flock(fd, fcntl.LOCK_UN)
            raise
        if previous is not None:
            note(
                f"stack {stack!r}: taking over the lock left by {previous.describe()}, "
                "which is no longer running"
            )
        me = Holder(
            os.getpid(), socket.gethostname(), command, datetime.now(UTC).replace(microsecond=0).isoformat()
        )
        _write(fd, me)
        try:
            yield me
        finally:
            os.ftruncate(fd, 0)  # empty = released cleanly; the flock goes with the close below
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _holder_or_none(path: Path) -> Holder | None:
    try:
        return read_holder(path)
    except LockError:
        return None


def current_holder(stack: str) -> Holder | None:
    """Who holds ``stack``'s lock right now, for `status`: read only, never takes the lock.

    A record whose process is gone (same host, pid not alive) is reported as free."""
    holder = _holder_or_none(lock_path(stack))
    if holder is None or holder.host != socket.gethostname():
        return holder
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another user's
    return holder
