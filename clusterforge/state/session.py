"""What a command does with its stack's state: read it once at the start, write it back at the end.

A command that changes the cluster (``changing``) takes the stack lock, brings the working copy
``.clusterforge/<stack>/`` to the backend's state (read once), runs, and writes the working copy
back conditional on the version it read. While it runs it renews its lease and writes the state
every few minutes, so that a runner that dies leaves the work it finished recorded. A command
that only reads (``reading``: status, plan, drift, baselines) copies the journal and baselines
into a private folder and reads them there; it never takes the lock.

With the default backend (``local``) the working copy is the state and the lock is the flock of
clusterforge/lock.py: today's behaviour, unchanged.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from clusterforge.journal import stack_dir, state_root_at
from clusterforge.lock import Holder, stack_lock
from clusterforge.lock import current_holder as local_holder
from clusterforge.spec.models import ClusterSpec
from clusterforge.state.backend import Backend, Unreachable
from clusterforge.state.config import backend_for
from clusterforge.state.errors import StateConflict, StateError
from clusterforge.state.index import write_report_index
from clusterforge.state.lease import LeaseLock
from clusterforge.state.lease import current_holder as lease_holder
from clusterforge.state.snapshot import Manifest, MissingObject, StackState

PUSH_EVERY_S = 300.0  # a running command writes its state this often (and at its end)
READ_PARTS = ("journal.", "baselines/")  # what a read-only command needs


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _reachable(backend: Backend) -> None:
    try:
        backend.check()
    except Unreachable as exc:
        raise StateError(f"{exc}. Nothing was changed on the cluster.") from None


class Writer:
    """Writes one command's working copy back, each time conditional on the state it last saw."""

    def __init__(
        self, store: StackState, workdir: Path, base: Manifest | None, lock: LeaseLock, command: str
    ):
        self.store, self.workdir, self.base, self.lock, self.command = store, workdir, base, lock, command
        self.last = time.monotonic()

    def write(self) -> Manifest | None:
        if self.lock.lost:
            raise StateConflict(f"{self.lock.lost}; this command's state is kept in {self.workdir}")
        self.base = self.store.push(
            self.workdir, self.base, self.command, prepare=lambda d: write_report_index(d, self.store.stack)
        )
        self.last = time.monotonic()
        return self.base

    def maybe_write(self, every_s: float) -> None:
        """From the lease thread: write when ``every_s`` has passed (a failure waits for the next)."""
        if time.monotonic() - self.last < every_s:
            return
        try:
            self.write()
        except (StateError, Unreachable) as exc:
            self.last = time.monotonic()
            _stderr(f"warning: the state could not be written on the way ({exc}); trying again later")


@contextmanager
def changing(
    spec: ClusterSpec,
    command: str,
    *,
    wait: bool = False,
    note: Callable[[str], None] = _stderr,
    poll_s: float = 2.0,
    push_every_s: float = PUSH_EVERY_S,
) -> Iterator[None]:
    """Hold the stack's lock and its state for a command that changes the cluster.

    Raises ``LockError``/``StackLocked`` (held: exit 2), ``StateError`` (a backend that cannot
    be reached, a foreign or conflicting state: nothing was changed) before the body runs, and
    ``StateError`` after it when its state could not be written (saying what to run)."""
    backend = backend_for(spec)
    if backend is None:
        with stack_lock(spec.stack, command, wait=wait, poll_s=poll_s, note=note):
            yield
        return
    _reachable(backend)
    lock = LeaseLock(backend, spec.stack, command, lease_s=spec.state.lease_s, note=note)
    try:
        lock.acquire(wait=wait, poll_s=poll_s)
    except Unreachable as exc:
        raise StateError(f"{exc}. Nothing was changed on the cluster.") from None
    try:
        store = StackState(backend, spec.stack)
        workdir = stack_dir(spec.stack)
        try:
            base = store.pull(workdir)
        except Unreachable as exc:
            raise StateError(f"{exc}. Nothing was changed on the cluster.") from None
        writer = Writer(store, workdir, base, lock, command)
        lock.start_renewing(also=lambda: writer.maybe_write(push_every_s))
        failed = True
        try:
            yield
            failed = False
        finally:
            lock.stop_renewing()
            _final_write(writer, spec.stack, backend.url, failed)
    finally:
        lock.release()


def _final_write(writer: Writer, stack: str, url: str, failed: bool) -> None:
    try:
        writer.write()
    except (StateError, Unreachable) as exc:
        kept = f"this command's state is kept in {writer.workdir}"
        if isinstance(exc, Unreachable):
            message = (
                f"the state could not be written to {url} ({exc}); {kept}: write it with `invoke state.push "
                f"--stack {stack}` once the backend is reachable (nothing else needs re-running)"
            )
        else:
            message = str(exc)
        if failed:  # the command's own failure is what the caller must see; say this beside it
            _stderr(f"error: {message}")
            return
        if isinstance(exc, StateError):
            raise
        raise StateError(message) from None


@contextmanager
def reading(spec: ClusterSpec, parts: tuple[str, ...] = READ_PARTS) -> Iterator[None]:
    """Read the stack's state as the backend holds it now, in a private copy (no lock)."""
    backend = backend_for(spec)
    if backend is None:
        yield
        return
    _reachable(backend)
    tmp = Path(tempfile.mkdtemp(prefix="clusterforge-state-"))
    try:
        for attempt in range(3):
            try:
                StackState(backend, spec.stack).pull(tmp / spec.stack, only=parts, check=False)
                break
            except MissingObject:
                if attempt == 2:  # a writer's clean-up raced this read three times: say so
                    raise
            except Unreachable as exc:
                raise StateError(str(exc)) from None
        with state_root_at(tmp):
            yield
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def holder(spec: ClusterSpec) -> Holder | None:
    """Who holds the stack's lock now (for `status`); None when free or unknown."""
    backend = backend_for(spec)
    if backend is None:
        return local_holder(spec.stack)
    try:
        return lease_holder(backend, spec.stack)
    except Unreachable:
        return None
