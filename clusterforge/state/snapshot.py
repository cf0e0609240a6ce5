"""A stack's state in a backend: a manifest naming every file by its hash, written conditionally.

What travels (relative to the stack's folder ``.clusterforge/<stack>/``): the journal
(``journal.json`` + ``journal.log``), the fleet baselines (``baselines/``) and the reports with
their index (``reports/``). Not the run logs (``runs/``, kept by CI as artifacts), nor the lock.

In the backend, under ``<stack>/``:

- ``objects/<sha256>``: each file's content, gzip-compressed, named by the SHA-256 of the
  uncompressed content (so an unchanged file is never uploaded twice, and a damaged object is
  recognised: its content no longer hashes to its name);
- ``state.json``: the manifest, ``{"kind": "clusterforge-state", "version": 1, "stack",
  "lineage", "serial", "written_at", "written_by", "objects": {path: {sha256, size}}}``. Writing
  it is the commit: conditional on the version read at the start (``If-Match``; ``If-None-Match``
  for the first), so a concurrent writer is detected and refused, never overwritten; a write that
  fails leaves the previous manifest, and with it the previous state, whole. ``lineage`` names
  the history (Terraform's state has the same), ``serial`` counts its writes;
- ``secrets/<name>``: small secret blobs beside the state, never in the manifest or a report
  (today the cluster's munge key, which every runner's converge must use).

The working copy remembers what it was synced from in ``state-sync.json`` (backend, lineage,
serial, manifest version, and each file's hash with its size and mtime, so an unchanged file is
not hashed again). Files are read and written in parallel: a stack of 4,096 nodes has ~12,000
report files.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import socket
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.journal import journal_files, now_iso, write_atomic, write_atomic_bytes
from clusterforge.state.backend import Backend, PreconditionFailed
from clusterforge.state.errors import ForeignState, StateConflict, StateError

KIND = "clusterforge-state"
VERSION = 1
MANIFEST = "state.json"
SYNC_META = "state-sync.json"
JOURNAL_FILES = ("journal.json", "journal.log")
SYNCED_DIRS = ("baselines", "reports")
SECRETS = ("munge.key",)  # files of the stack folder kept as backend secrets
WORKERS = 16


@dataclass(frozen=True)
class Entry:
    sha256: str
    size: int


@dataclass
class Manifest:
    stack: str
    lineage: str
    serial: int
    objects: dict[str, Entry]
    written_at: str = ""
    written_by: dict[str, Any] = field(default_factory=dict)
    version: str = ""  # the backend's version of the manifest object (not in the JSON)

    def to_bytes(self) -> bytes:
        data = {
            "kind": KIND,
            "version": VERSION,
            "stack": self.stack,
            "lineage": self.lineage,
            "serial": self.serial,
            "written_at": self.written_at,
            "written_by": self.written_by,
            "objects": {p: {"sha256": e.sha256, "size": e.size} for p, e in sorted(self.objects.items())},
        }
        return (json.dumps(data, indent=1) + "\n").encode()

    def by(self) -> str:
        who = self.written_by
        what = f"`{who.get('command', '?')}` on {who.get('host', '?')}" if who else "an unknown writer"
        return f"serial {self.serial}, written by {what} at {self.written_at or 'an unknown time'}"


@dataclass
class SyncMeta:
    """What the working copy was last synced from (``state-sync.json``)."""

    backend: str
    lineage: str
    serial: int
    version: str
    files: dict[str, tuple[str, int, int]]  # path -> (sha256, size, mtime_ns)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_manifest(data: bytes, where: str, version: str, stack: str) -> Manifest:
    """The manifest in ``data``; ``ForeignState`` naming the object and its version otherwise."""
    named = f"state object {where} (version {version})"
    try:
        raw = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ForeignState(
            f"{named} is not JSON ({exc}): corrupt or not clusterforge's; restore an earlier "
            "version of it (bucket versioning) or remove it to start the stack's state afresh"
        ) from None
    if not isinstance(raw, dict) or raw.get("kind") != KIND:
        kind = raw.get("kind") if isinstance(raw, dict) else type(raw).__name__
        raise ForeignState(
            f"{named} is not a clusterforge state manifest (kind {kind!r}, expected {KIND!r}); "
            "state.backend must name a place of clusterforge's own"
        )
    if raw.get("version") != VERSION:
        raise ForeignState(
            f"{named} has state format {raw.get('version')!r}; this clusterforge reads {VERSION}: "
            "use the clusterforge release that wrote it"
        )
    if raw.get("stack") != stack:
        raise ForeignState(f"{named} holds the state of stack {raw.get('stack')!r}, not {stack!r}")
    try:
        objects = {str(p): Entry(str(e["sha256"]), int(e["size"])) for p, e in dict(raw["objects"]).items()}
        for path in objects:
            if not _synced_path(path):
                raise ValueError(f"unexpected path {path!r}")
        return Manifest(stack, str(raw["lineage"]), int(raw["serial"]), objects,
                        str(raw.get("written_at", "")), dict(raw.get("written_by") or {}), version)  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        raise ForeignState(f"{named} is damaged ({exc}); restore an earlier version of it") from None


def _synced_path(path: str) -> bool:
    parts = Path(path).parts
    if not parts or path.startswith("/") or ".." in parts or any(p.startswith(".") for p in parts):
        return False
    return path in JOURNAL_FILES or (len(parts) > 1 and parts[0] in SYNCED_DIRS)


def read_meta(workdir: Path) -> SyncMeta | None:
    try:
        raw = json.loads((workdir / SYNC_META).read_text())
        files = {str(p): (str(v[0]), int(v[1]), int(v[2])) for p, v in raw["files"].items()}
        return SyncMeta(
            str(raw["backend"]), str(raw["lineage"]), int(raw["serial"]), str(raw["version"]), files
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise StateError(
            f"{workdir / SYNC_META}: unreadable ({exc}); remove it and run `invoke state.pull --stack "
            f"{workdir.name} --force` to take the backend's state"
        ) from None


def write_meta(workdir: Path, meta: SyncMeta) -> None:
    data = {"backend": meta.backend, "lineage": meta.lineage, "serial": meta.serial, "version": meta.version,
            "files": {p: list(v) for p, v in sorted(meta.files.items())}}  # fmt: skip
    write_atomic(workdir / SYNC_META, json.dumps(data) + "\n")


def scan(
    workdir: Path, known: dict[str, tuple[str, int, int]] | None = None
) -> dict[str, tuple[str, int, int]]:
    """Every synced file of the working copy: path -> (sha256, size, mtime_ns)."""
    return _scan(workdir, known)[0]


def _scan(
    workdir: Path, known: dict[str, tuple[str, int, int]] | None = None
) -> tuple[dict[str, tuple[str, int, int]], dict[str, bytes]]:
    """``scan``, and the journal's files as read (they change while a command runs).

    A file whose size and mtime are those recorded keeps its recorded hash (not read again). The
    journal's two files are read together under its lock, so a compaction never splits them."""
    known = known or {}
    out: dict[str, tuple[str, int, int]] = {}
    journal = journal_files(workdir)
    for name, data in journal.items():
        out[name] = (_sha(data), len(data), 0)
    paths: list[Path] = []
    for top in SYNCED_DIRS:
        base = workdir / top
        if base.is_dir():
            paths += [p for p in base.rglob("*") if p.is_file() and _synced_path(str(p.relative_to(workdir)))]

    def one(path: Path) -> tuple[str, tuple[str, int, int]] | None:
        rel = str(path.relative_to(workdir))
        try:
            st = path.stat()
            seen = known.get(rel)
            if seen and seen[1] == st.st_size and seen[2] == st.st_mtime_ns:
                return rel, seen
            return rel, (_sha(path.read_bytes()), st.st_size, st.st_mtime_ns)
        except FileNotFoundError:  # removed while scanning (a report replaced): not part of this write
            return None

    with ThreadPoolExecutor(WORKERS) as pool:
        for item in pool.map(one, paths):
            if item is not None:
                out[item[0]] = item[1]
    return out, journal


def _same(a: dict[str, tuple[str, int, int]], b: dict[str, tuple[str, int, int]]) -> bool:
    return a.keys() == b.keys() and all(a[k][0] == b[k][0] for k in a)


class MissingObject(ForeignState):
    """An object the manifest names is not in the backend (lost, or a writer's clean-up raced a read)."""


class StackState:
    """The state of one stack in one backend."""

    def __init__(self, backend: Backend, stack: str) -> None:
        self.backend, self.stack = backend, stack
        self.manifest_key = f"{stack}/{MANIFEST}"
        self.where = backend.where(self.manifest_key)

    def _object_key(self, sha: str) -> str:
        return f"{self.stack}/objects/{sha}"

    # --- the manifest ------------------------------------------------------------------------

    def read(self) -> Manifest | None:
        blob = self.backend.get(self.manifest_key)
        if blob is None:
            return None
        return parse_manifest(blob.data, self.where, blob.version, self.stack)

    # --- secrets (small blobs beside the state: never in the manifest or a report) ------------

    def secret_key(self, name: str) -> str:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"secret name {name!r}: one plain file name")
        return f"{self.stack}/secrets/{name}"

    def get_secret(self, name: str) -> bytes | None:
        blob = self.backend.get(self.secret_key(name))
        return blob.data if blob else None

    def put_secret(self, name: str, data: bytes, *, only_if_absent: bool = True) -> bool:
        """Store a secret; with ``only_if_absent`` (the default) an existing one is kept: False."""
        try:
            self.backend.put(self.secret_key(name), data, if_absent=only_if_absent)
        except PreconditionFailed:
            return False
        return True

    # --- pulling into a working copy ---------------------------------------------------------

    def check_copy(self, workdir: Path, manifest: Manifest | None) -> SyncMeta | None:
        """Refuse a working copy that would lose or mix histories if pulled over; return its meta."""
        meta = read_meta(workdir)
        local = scan(workdir, meta.files if meta else None)
        stack = self.stack
        if meta is not None and meta.backend != self.backend.url:
            raise StateConflict(
                f"{workdir} was synced with state backend {meta.backend}, not {self.backend.url} (the spec's "
                f"state.backend): move it away, or `invoke state.pull --stack {stack} --force` to replace it"
            )
        dirty = bool(local) if meta is None else not _same(local, meta.files)
        if manifest is None:
            if meta is not None:
                raise StateConflict(
                    f"{self.where} is gone, though {workdir} was synced with it (serial {meta.serial}): restore it "
                    f"from this copy with `invoke state.push --stack {stack}`"
                )
            if local:
                raise StateConflict(
                    f"state backend {self.backend.url} holds no state for stack {stack!r}, but {workdir} does: "
                    f"move it there once with `invoke state.push --stack {stack}`"
                )
            return None
        if meta is None and local:
            raise StateConflict(
                f"{self.where} holds a history for stack {stack!r} ({manifest.by()}), and {workdir} holds "
                f"another one: take the backend's with `invoke state.pull --stack {stack} --force` (yours is "
                "kept aside), never both"
            )
        if meta is not None and meta.lineage != manifest.lineage:
            raise StateConflict(
                f"{self.where} holds another history for stack {stack!r} (lineage {manifest.lineage}, "
                f"{manifest.by()}) than {workdir} (lineage {meta.lineage}): take the backend's with "
                f"`invoke state.pull --stack {stack} --force`"
            )
        if meta is not None and dirty and meta.serial != manifest.serial:
            raise StateConflict(
                f"{workdir} has changes not written to {self.backend.url} (made on serial {meta.serial}), and the "
                f"backend moved on ({manifest.by()}): take the backend's with `invoke state.pull --stack "
                f"{stack} --force` (yours is kept aside)"
            )
        if meta is not None and meta.serial > manifest.serial:
            raise StateConflict(
                f"{self.where} is at serial {manifest.serial}, older than {workdir} (serial {meta.serial}): "
                f"was it restored by hand? write this copy back with `invoke state.push --stack {stack}`"
            )
        return meta

    def pull(
        self, workdir: Path, *, only: Iterable[str] | None = None, check: bool = True
    ) -> Manifest | None:
        """Bring the working copy to the backend's state (read once); None when there is none yet.

        ``only``: path prefixes to fetch (a read-only command needs the journal, not the reports).
        A working copy with unwritten changes on the current serial keeps them (they are written
        at the command's end)."""
        manifest = self.read()
        meta = self.check_copy(workdir, manifest) if check else None
        if manifest is None:
            return None
        if meta is not None and meta.version == manifest.version:
            return manifest  # already this state (and any unwritten changes of ours stay)
        workdir.mkdir(parents=True, exist_ok=True)
        local = scan(workdir, meta.files if meta else None)
        wanted = {p: e for p, e in manifest.objects.items() if only is None or p.startswith(tuple(only))}
        fetch = [(p, e) for p, e in wanted.items() if local.get(p, ("",))[0] != e.sha256]

        def get(item: tuple[str, Entry]) -> None:
            path, entry = item
            data = self._fetch(path, entry, manifest)
            write_atomic_bytes(workdir / path, data, 0o644, sync_dir=False)  # the meta, last, is synced

        with ThreadPoolExecutor(WORKERS) as pool:
            list(pool.map(get, fetch))
        self._pull_secrets(workdir)
        if only is None:  # a whole copy: what the backend does not hold goes, and the copy is recorded
            for path in set(local) - set(manifest.objects):
                (workdir / path).unlink(missing_ok=True)
            files = scan(workdir)
            write_meta(
                workdir,
                SyncMeta(self.backend.url, manifest.lineage, manifest.serial, manifest.version, files),
            )
        return manifest

    def _fetch(self, path: str, entry: Entry, manifest: Manifest) -> bytes:
        key = self._object_key(entry.sha256)
        blob = self.backend.get(key)
        named = f"state object {self.backend.where(key)} ({path} of {manifest.by()})"
        if blob is None:
            raise MissingObject(
                f"{named} is missing: the backend lost part of the state; restore it, or write "
                f"a whole state from a working copy with `invoke state.push --stack {self.stack}`"
            )
        try:
            data = gzip.decompress(blob.data)
        except (OSError, EOFError) as exc:
            raise ForeignState(f"{named} is corrupt ({exc}); restore an earlier version of it") from None
        if _sha(data) != entry.sha256:
            raise ForeignState(
                f"{named} is corrupt: its content hashes to {_sha(data)[:12]}…, not its name; "
                "restore an earlier version of it"
            )
        return data

    def _pull_secrets(self, workdir: Path) -> None:
        for name in SECRETS:
            data = self.get_secret(name)
            path = workdir / name
            if data is not None and (not path.exists() or path.read_bytes() != data):
                write_atomic_bytes(path, data, mode=0o600)

    # --- writing back ------------------------------------------------------------------------

    def push(
        self,
        workdir: Path,
        base: Manifest | None,
        command: str,
        *,
        lineage: str | None = None,
        prepare: Callable[[Path], None] | None = None,
    ) -> Manifest:
        """Write the working copy as the next state, conditional on ``base`` (the state read).

        Returns the new manifest (``base`` itself when nothing changed). ``StateConflict`` when the
        manifest changed since ``base`` was read: nothing is overwritten."""
        if prepare is not None:
            prepare(workdir)
        meta = read_meta(workdir)
        local, journal = _scan(workdir, meta.files if meta else None)
        self._push_secrets(workdir)
        if base is not None and _same(local, {p: (e.sha256, e.size, 0) for p, e in base.objects.items()}):
            return base
        present = {e.sha256 for e in base.objects.values()} if base else set()
        uploads = [path for path, (sha, _, _) in local.items() if sha not in present]

        def put(path: str) -> tuple[str, tuple[str, int, int]]:
            if path in journal:
                data, entry = journal[path], local[path]
            else:  # read now: a report rewritten since the scan is written as it is now
                data = (workdir / path).read_bytes()
                entry = (_sha(data), len(data), (workdir / path).stat().st_mtime_ns)
            with contextlib.suppress(PreconditionFailed):  # the same content is there already
                self.backend.put(self._object_key(entry[0]), gzip.compress(data, 6, mtime=0), if_absent=True)
            return path, entry

        with ThreadPoolExecutor(WORKERS) as pool:
            local.update(dict(pool.map(put, uploads)))
        self.backend.sync(f"{self.stack}/objects")
        new = Manifest(
            self.stack,
            base.lineage if base else (lineage or uuid.uuid4().hex),
            (base.serial if base else 0) + 1,
            {p: Entry(sha, size) for p, (sha, size, _) in local.items()},
            now_iso(),
            {"command": command, "host": socket.gethostname(), "pid": os.getpid()},
        )
        try:
            if base is None:
                new.version = self.backend.put(self.manifest_key, new.to_bytes(), if_absent=True)
            else:
                new.version = self.backend.put(self.manifest_key, new.to_bytes(), if_match=base.version)
        except PreconditionFailed:
            now = self._describe_current()
            raise StateConflict(
                f"the state of stack {self.stack!r} in {self.backend.url} changed since this command read it "
                f"({'serial ' + str(base.serial) if base else 'none'} then; now {now}): another command wrote it "
                f"meanwhile. Nothing was overwritten; this command's state is kept in {workdir}"
            ) from None
        write_meta(workdir, SyncMeta(self.backend.url, new.lineage, new.serial, new.version, local))
        if base is not None:
            self._collect(
                set(e.sha256 for e in base.objects.values()) - {e.sha256 for e in new.objects.values()}
            )
        return new

    def _describe_current(self) -> str:
        try:
            current = self.read()
        except (StateError, Exception):  # noqa: BLE001 - only to word the refusal
            return "unreadable"
        return current.by() if current else "gone"

    def _collect(self, shas: set[str]) -> None:
        """Delete objects the new manifest no longer names (best effort: leftovers only cost space)."""
        for sha in shas:
            with contextlib.suppress(Exception):  # an object left behind only costs space
                self.backend.delete(self._object_key(sha))

    def _push_secrets(self, workdir: Path) -> None:
        for name in SECRETS:
            path = workdir / name
            if path.is_file():
                self.put_secret(name, path.read_bytes(), only_if_absent=True)
