"""state.push, state.pull, state.show, state.unlock: a stack's state in its backend (thin).

The backend is the spec's ``state: {backend: ...}``; the library is clusterforge/state."""

from __future__ import annotations

import json as jsonlib
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from invoke import Context, task
from invoke.exceptions import Exit

from clusterforge.spec.models import ClusterSpec
from clusterforge.state.backend import Backend
from clusterforge.tasks._cli import EXIT_BUSY, friendly
from clusterforge.tasks.cluster import _HELP_SPEC, _HELP_STACK, load

T = TypeVar("T")


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _remote(cluster: ClusterSpec) -> Backend:
    from clusterforge.state.config import backend_for

    backend = backend_for(cluster)
    if backend is None:
        raise Exit(
            f"stack {cluster.stack!r} keeps its state locally (state.backend: local): set `state: {{backend: "
            "s3://BUCKET/PREFIX}` (or a shared path) in its spec first",
            code=2,
        )
    return backend


def _run(fn: Callable[[], T]) -> T:
    """State errors as one line: unreachable exit 1, refused (conflict, foreign) exit 2."""
    from clusterforge.lock import LockError
    from clusterforge.state import StateError
    from clusterforge.state.backend import Unreachable

    try:
        return fn()
    except LockError as exc:
        raise Exit(str(exc), code=EXIT_BUSY) from None
    except Unreachable as exc:
        raise Exit(f"error: {exc}", code=1) from None
    except StateError as exc:
        raise Exit(f"error: {exc}", code=exc.exit_code) from None


@contextmanager
def _lease(cluster: ClusterSpec, backend: Backend, command: str, wait: bool) -> Iterator[None]:
    """The stack's lock alone (these tasks read and write the state themselves)."""
    from clusterforge.state.lease import LeaseLock

    _run(backend.check)
    lock = LeaseLock(backend, cluster.stack, command, lease_s=cluster.state.lease_s, note=_stderr)
    _run(lambda: lock.acquire(wait=wait))
    try:
        yield
    finally:
        lock.release()


def _describe(paths: Any) -> str:
    reports = sum(1 for p in paths if p.startswith("reports/"))
    baselines = sum(1 for p in paths if p.startswith("baselines/"))
    journal = "the journal" if any(p.startswith("journal.") for p in paths) else "no journal"
    return f"{journal}, {baselines} baseline(s), {reports} report file(s)"


@task(
    help={"stack": _HELP_STACK, "spec": _HELP_SPEC, "wait": "wait for the stack's lock instead of exiting 2"}
)
@friendly
def push(c: Context, stack: str = "", spec: str = "", wait: bool = False) -> None:
    """Write this machine's copy of the stack's state (.clusterforge/STACK/) to the spec's backend.

    The first time, moves the local history there (journal, baselines, reports, the munge key as a
    secret); later, writes back a copy whose write failed. Refuses (exit 2), never overwriting, when
    the backend holds another history for the stack or moved on since this copy was synced.
    Takes the stack's lock."""
    from clusterforge.journal import stack_dir
    from clusterforge.state.errors import StateConflict
    from clusterforge.state.index import write_report_index
    from clusterforge.state.snapshot import StackState, read_meta, scan

    cluster = load(stack, spec)
    backend = _remote(cluster)
    store = StackState(backend, cluster.stack)
    workdir = stack_dir(cluster.stack)

    def go() -> str:
        manifest = store.read()
        meta = read_meta(workdir)
        fix = f"take the backend's with `invoke state.pull --stack {cluster.stack} --force`"
        if manifest is not None and (meta is None or meta.lineage != manifest.lineage):
            raise StateConflict(
                f"{store.where} already holds another history for stack {cluster.stack!r} ({manifest.by()}) "
                f"than {workdir}: refusing to overwrite it; {fix}"
            )
        if manifest is not None and meta is not None and meta.version != manifest.version:
            raise StateConflict(
                f"{store.where} moved on since {workdir} was synced (now {manifest.by()}; this copy: serial "
                f"{meta.serial}): refusing to overwrite it; {fix}"
            )
        if manifest is None and not scan(workdir):
            raise Exit(f"{workdir}: no state to push (no journal, baselines or reports)", code=1)
        new = store.push(
            workdir,
            manifest,
            "invoke state.push",
            lineage=meta.lineage if meta is not None else None,
            prepare=lambda d: write_report_index(d, cluster.stack),
        )
        if manifest is not None and new.version == manifest.version:
            return f"{store.where}: already holds this copy ({manifest.by()}); nothing written"
        return f"{workdir} -> {store.where}: {_describe(new.objects)}; serial {new.serial}, lineage {new.lineage}"

    with _lease(cluster, backend, "invoke state.push", wait):
        print(_run(go))


@task(
    help={
        "stack": _HELP_STACK,
        "spec": _HELP_SPEC,
        "force": "replace this machine's copy even when it holds changes or another history (kept aside)",
    }
)
@friendly
def pull(c: Context, stack: str = "", spec: str = "", force: bool = False) -> None:
    """Bring this machine's copy of the stack's state (.clusterforge/STACK/) to the backend's.

    Refuses (exit 2) when this copy holds changes the backend lacks or another history, unless
    --force: then this copy's journal, baselines and reports are first moved aside into
    .clusterforge/STACK/kept-<time>/. Needs no lock (the backend's state is read atomically)."""
    from clusterforge.journal import stack_dir
    from clusterforge.state.errors import StateConflict
    from clusterforge.state.snapshot import JOURNAL_FILES, SYNC_META, SYNCED_DIRS, StackState

    cluster = load(stack, spec)
    backend = _remote(cluster)
    store = StackState(backend, cluster.stack)
    workdir = stack_dir(cluster.stack)

    def go() -> str:
        try:
            manifest = store.pull(workdir)
        except StateConflict:
            if not force:
                raise
            kept = workdir / f"kept-{time.strftime('%Y%m%dT%H%M%S')}"
            kept.mkdir(parents=True)
            for name in (*JOURNAL_FILES, *SYNCED_DIRS, SYNC_META):
                if (workdir / name).exists():
                    shutil.move(str(workdir / name), str(kept / name))
            _stderr(f"note: this copy's state was moved aside to {kept}")
            manifest = store.pull(workdir)
        if manifest is None:
            return f"{store.where}: no state for stack {cluster.stack!r} yet"
        return f"{store.where} -> {workdir}: {_describe(manifest.objects)}; {manifest.by()}"

    print(_run(go))


@task(help={"stack": _HELP_STACK, "spec": _HELP_SPEC, "json": "print JSON"})
@friendly
def show(c: Context, stack: str = "", spec: str = "", json: bool = False) -> None:
    """Where the stack's state lives and what it holds: serial, last writer, lock holder, and whether
    this machine's copy is in step with it (changes nothing, takes no lock)."""
    from clusterforge.journal import stack_dir
    from clusterforge.state import holder
    from clusterforge.state.snapshot import StackState, read_meta, scan

    cluster = load(stack, spec)
    backend = _remote(cluster)
    store = StackState(backend, cluster.stack)
    workdir = stack_dir(cluster.stack)
    _run(backend.check)
    manifest = _run(store.read)
    meta = _run(lambda: read_meta(workdir))
    local = scan(workdir, meta.files if meta else None)
    if meta is None:
        copy = "no copy synced here" + (" (a local history not in the backend)" if local else "")
    elif manifest is None or meta.lineage != manifest.lineage:
        copy = "another history than the backend's"
    elif meta.version != manifest.version:
        copy = f"behind (serial {meta.serial}): the next command (or state.pull) brings it up"
    elif {p: v[0] for p, v in local.items()} != {p: v[0] for p, v in meta.files.items()}:
        copy = "changes not written to the backend: `invoke state.push`"
    else:
        copy = "in step"
    who = holder(cluster)
    size = sum(e.size for e in manifest.objects.values()) if manifest else 0
    data: dict[str, Any] = {
        "stack": cluster.stack,
        "backend": backend.url,
        "serial": manifest.serial if manifest else None,
        "lineage": manifest.lineage if manifest else None,
        "written_at": manifest.written_at if manifest else None,
        "written_by": manifest.written_by if manifest else None,
        "objects": len(manifest.objects) if manifest else 0,
        "bytes": size,
        "lock": who.describe() if who else None,
        "this_copy": copy,
    }
    if json:
        print(jsonlib.dumps(data, indent=2))
        return
    print(f"stack {cluster.stack}: state in {backend.url}")
    if manifest is None:
        print("  no state written yet")
    else:
        print(f"  {manifest.by()}; lineage {manifest.lineage}")
        print(f"  holds {_describe(manifest.objects)} ({size / 1e6:.1f} MB)")
    print(f"  lock: {data['lock'] or 'free'}")
    print(f"  this machine's copy ({workdir}): {copy}")


@task(
    help={
        "stack": _HELP_STACK,
        "spec": _HELP_SPEC,
        "force": "remove the lock even while its lease runs, or when it is not a clusterforge lock record",
    }
)
@friendly
def unlock(c: Context, stack: str = "", spec: str = "", force: bool = False) -> None:
    """Remove the stack's lock from its backend: one whose lease ran out, or (--force) any.

    Only for a lock whose command is known to be gone: a live command's state write is then
    refused (its lock was taken), never mixed with another's."""
    from clusterforge.lock import LockError
    from clusterforge.state.lease import lock_key, parse_record

    cluster = load(stack, spec)
    backend = _remote(cluster)
    key = lock_key(cluster.stack)
    blob = _run(lambda: backend.get(key))
    if blob is None:
        print(f"{backend.where(key)}: no lock")
        return
    try:
        record = parse_record(blob, backend.where(key), cluster.stack)
        live = record.expires > time.time()
        what = record.describe(time.time())
    except LockError as exc:
        if not force:
            raise Exit(f"{exc}; give --force to remove it", code=EXIT_BUSY) from None
        live, what = False, "a record that is not a clusterforge lock"
    if live and not force:
        raise Exit(
            f"{backend.where(key)}: held by {what}; remove it only if that command is gone: --force",
            code=EXIT_BUSY,
        )
    _run(lambda: backend.delete(key, if_match=blob.version))
    print(f"{backend.where(key)}: removed ({what})")
