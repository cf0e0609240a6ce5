"""The stack lock in a backend every runner reaches: a lease taken with a conditional write.

Acquire: create ``<stack>/lock.json`` only if absent (S3 ``If-None-Match: *``; an exclusive create
on a filesystem). Exactly one of any number of runners starting at once succeeds; the others
read the record and are refused naming the holder (or wait, with ``--wait``).

The record says who holds the lock (pid, host, command, since when), a random token, and until
when its lease runs. The holder renews the lease every third of it (a conditional write on the
version it last wrote), so a live holder is never taken over. A holder that died (killed, its
machine gone) stops renewing: once the lease has run out, the next command replaces the record,
again conditionally on the version it read, so of several runners taking over at once one wins,
and it says so in a note naming the dead holder. Expiry is judged on the wall clocks of the two
runners (NTP-synchronised machines; the default lease, 300 s, dwarfs their skew).

Release deletes the record if it is still this holder's (``If-Match``). A holder that finds its
lease taken over (it was stopped past its lease) is told so, and its state write is refused.

A record that is not a clusterforge lock record is never ignored or replaced: the command stops
and names the object and how to clear it (``invoke state.unlock``).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from clusterforge.lock import LOCK_KIND, Holder, LockError, StackLocked, ago
from clusterforge.state.backend import Backend, Blob, PreconditionFailed, Unreachable

LEASE_VERSION = 2  # version 1 is the local flock record (clusterforge/lock.py)
DEFAULT_LEASE_S = 300
CONTENDED_TRIES = 20  # a lock taken and released this often while we look: give up rather than spin


def lock_key(stack: str) -> str:
    return f"{stack}/lock.json"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).replace(microsecond=0).isoformat()


@dataclass(frozen=True)
class LeaseRecord:
    stack: str
    token: str
    pid: int
    host: str
    command: str
    started: str
    renewed: float  # seconds since the epoch, the holder's clock
    lease_s: int

    @property
    def expires(self) -> float:
        return self.renewed + self.lease_s

    @property
    def holder(self) -> Holder:
        return Holder(self.pid, self.host, self.command, self.started)

    def to_bytes(self) -> bytes:
        return (json.dumps({"kind": LOCK_KIND, "version": LEASE_VERSION, **asdict(self)}) + "\n").encode()

    def describe(self, now: float) -> str:
        left = self.expires - now
        lease = f"lease renewed {_ago_s(now - self.renewed)}, " + (
            f"runs out in {int(left)} s" if left > 0 else f"ran out {_ago_s(-left)}"
        )
        return f"{self.holder.describe()}; {lease}"


def _ago_s(seconds: float) -> str:
    return ago(_iso(time.time() - max(0.0, seconds)))


def parse_record(blob: Blob, where: str, stack: str) -> LeaseRecord:
    """The record in ``blob``; ``LockError`` naming the object when it is not a lock of ``stack``."""
    fix = (
        f"if no clusterforge command is running on stack {stack!r}, clear it with "
        f"`invoke state.unlock --stack {stack} --force` and run again"
    )
    try:
        data = json.loads(blob.data)
        if not isinstance(data, dict) or data.get("kind") != LOCK_KIND:
            kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"kind {kind!r}, expected {LOCK_KIND!r}")
        if data.get("version") != LEASE_VERSION:
            raise ValueError(f"version {data.get('version')!r}, expected {LEASE_VERSION}")
        if data.get("stack") != stack:
            raise ValueError(f"a lock of stack {data.get('stack')!r}")
        return LeaseRecord(
            stack=str(data["stack"]),
            token=str(data["token"]),
            pid=int(data["pid"]),
            host=str(data["host"]),
            command=str(data["command"]),
            started=str(data["started"]),
            renewed=float(data["renewed"]),
            lease_s=int(data["lease_s"]),
        )
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise LockError(f"lock object {where} is not a clusterforge lock record ({exc}); {fix}") from None


class LeaseLock:
    """One command's hold on a stack's lock in ``backend``."""

    def __init__(
        self,
        backend: Backend,
        stack: str,
        command: str,
        *,
        lease_s: int = DEFAULT_LEASE_S,
        note: Callable[[str], None] = print,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.backend, self.stack, self.command = backend, stack, command
        self.lease_s, self.note, self.clock = lease_s, note, clock
        self.key = lock_key(stack)
        self.where = backend.where(self.key)
        self.record: LeaseRecord | None = None
        self._version = ""
        self.lost = ""  # why the lock is no longer ours ("" while held)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()

    # --- taking and giving back --------------------------------------------------------------

    def _mine(self) -> LeaseRecord:
        now = self.clock()
        return LeaseRecord(
            self.stack,
            uuid.uuid4().hex,
            os.getpid(),
            socket.gethostname(),
            self.command,
            _iso(now),
            now,
            self.lease_s,
        )

    def acquire(self, *, wait: bool = False, poll_s: float = 2.0) -> Holder:
        """Take the lock or raise ``StackLocked`` naming the holder (with ``wait``: poll until free)."""
        told = False
        while True:
            taken = self._try()
            if taken is None:
                assert self.record is not None
                return self.record.holder
            if not wait:
                raise StackLocked(
                    f"stack {self.stack!r} is busy: {taken.describe(self.clock())} holds its lock "
                    f"({self.where}); wait for it to finish, or run again with --wait",
                    taken.holder,
                )
            if not told:
                self.note(
                    f"stack {self.stack!r} is busy: {taken.describe(self.clock())}; waiting for it (--wait)"
                )
                told = True
            time.sleep(poll_s)

    def _try(self) -> LeaseRecord | None:
        """None when the lock is now ours; else the live record that holds it."""
        for _ in range(CONTENDED_TRIES):
            mine = self._mine()
            try:
                self._version = self.backend.put(self.key, mine.to_bytes(), if_absent=True)
                self.record = mine
                return None
            except PreconditionFailed:
                pass
            blob = self.backend.get(self.key)
            if blob is None:
                continue  # released between our write and our read: try again
            current = parse_record(blob, self.where, self.stack)
            now = self.clock()
            if current.expires > now:
                return current
            try:  # the lease ran out: replace exactly the record we read, or lose to whoever did first
                self._version = self.backend.put(self.key, mine.to_bytes(), if_match=blob.version)
            except PreconditionFailed:
                continue
            self.record = mine
            self.note(
                f"stack {self.stack!r}: taking over the lock left by {current.holder.describe()}: its lease "
                f"ran out {_ago_s(now - current.expires)} without being renewed (the command was killed or its "
                "machine went away); the state it wrote last is where this command starts"
            )
            return None
        raise LockError(
            f"stack {self.stack!r}: the lock ({self.where}) changed hands {CONTENDED_TRIES} times while this "
            "command tried to take it; run it again (with --wait to queue)"
        )

    def renew(self) -> bool:
        """Extend the lease; False (and ``lost`` says why) when another command took the lock over."""
        with self._mutex:
            if self.record is None or self.lost:
                return False
            fresh = LeaseRecord(**{**asdict(self.record), "renewed": self.clock()})
            try:
                self._version = self.backend.put(self.key, fresh.to_bytes(), if_match=self._version)
            except PreconditionFailed:
                self.lost = self._who_took()
                self.note(f"warning: stack {self.stack!r}: {self.lost}")
                return False
            self.record = fresh
            return True

    def _who_took(self) -> str:
        try:
            blob = self.backend.get(self.key)
            other = parse_record(blob, self.where, self.stack) if blob else None
        except (LockError, Unreachable):
            other = None
        who = other.holder.describe() if other else "nobody now"
        return (
            f"this command's lease ran out and its lock ({self.where}) was taken over (holder: {who}); "
            "its state write will be refused"
        )

    def release(self) -> None:
        self.stop_renewing()
        with self._mutex:
            if self.record is None or self.lost:
                return
            try:
                self.backend.delete(self.key, if_match=self._version)
            except PreconditionFailed:
                self.note(f"warning: stack {self.stack!r}: {self._who_took()}")
            except Unreachable as exc:
                self.note(
                    f"warning: the stack lock could not be released ({exc}); it frees itself when its lease "
                    f"runs out ({self.lease_s} s), or clear it with `invoke state.unlock --stack {self.stack}`"
                )
            self.record = None

    # --- renewing while the command runs -----------------------------------------------------

    def start_renewing(self, every_s: float | None = None, also: Callable[[], None] | None = None) -> None:
        """Renew every third of the lease in a thread; ``also`` runs after each renewal (a state push)."""
        period = every_s if every_s is not None else max(1.0, self.lease_s / 3)

        def loop() -> None:
            while not self._stop.wait(period):
                try:
                    if self.renew() and also is not None:
                        also()
                except Exception as exc:  # noqa: BLE001 - a failed renewal is retried; the lease has room
                    self.note(f"warning: stack {self.stack!r}: renewing the lock failed ({exc}); retrying")

        self._thread = threading.Thread(target=loop, name=f"lease-{self.stack}", daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=120)
        self._thread = None


def current_holder(backend: Backend, stack: str, clock: Callable[[], float] = time.time) -> Holder | None:
    """Who holds the stack's lock now (None: free, or a lease that ran out), for `status`."""
    blob = backend.get(lock_key(stack))
    if blob is None:
        return None
    try:
        record = parse_record(blob, backend.where(lock_key(stack)), stack)
    except LockError:
        return None
    return record.holder if record.expires > clock() else None
