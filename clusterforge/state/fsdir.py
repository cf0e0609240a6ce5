"""A state backend in a folder: the head node's or a shared filesystem's path (static clusters),
or any folder every runner mounts.

Objects are files under the folder; an object's version is the SHA-256 of its content (the
objects written above this layer, lock records and state manifests, carry a serial, a token and
a time, so two writes never have the same content). Conditional writes run under an exclusive
POSIX record lock (``lockf``) on ``.clusterforge-cas.lock`` in the folder: the kernel drops it
when its holder dies, and NFS carries record locks to the server (NLM on v3, built into v4), so
two machines on one export exclude each other; flock, by contrast, is only emulated there. A
write goes to a temporary file that is fsynced and renamed over the object: a reader sees the old
object or the new one, never half of one.

The folder must exist: a missing mount point must not quietly become a folder on the local disk.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clusterforge.journal import write_atomic_bytes
from clusterforge.state.backend import Backend, Blob, PreconditionFailed, Unreachable

CAS_LOCK = ".clusterforge-cas.lock"


def version_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class DirectoryBackend(Backend):
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.url = str(self.root)
        self._threads = threading.Lock()  # POSIX record locks do not exclude threads of one process

    def _unreachable(self, what: str) -> Unreachable:
        return Unreachable(
            f"state backend {self.url}: {what}; the folder must exist and be writable on every runner "
            f"(is the shared filesystem mounted here? create it once with `mkdir -p {self.url}`)"
        )

    def check(self) -> None:
        if not self.root.is_dir():
            raise self._unreachable("no such folder")
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise self._unreachable("not writable by this user")

    def _path(self, key: str) -> Path:
        if key.startswith("/") or ".." in Path(key).parts:
            raise ValueError(f"state object key {key!r} must be relative, without '..'")
        return self.root / key

    def get(self, key: str) -> Blob | None:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            if not self.root.is_dir():
                raise self._unreachable("no such folder") from None
            return None
        except OSError as exc:
            raise self._unreachable(f"cannot read {key} ({exc.strerror})") from None
        return Blob(data, version_of(data))

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        self.check()
        with self._threads:
            try:
                fd = os.open(self.root / CAS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise self._unreachable(f"cannot open {CAS_LOCK} ({exc.strerror})") from None
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # drops the record lock

    def _current(self, path: Path) -> str | None:
        try:
            return version_of(path.read_bytes())
        except FileNotFoundError:
            return None

    def put(self, key: str, data: bytes, *, if_match: str | None = None, if_absent: bool = False) -> str:
        path = self._path(key)
        with self._exclusive():
            if if_absent and path.exists():
                raise PreconditionFailed(f"{self.where(key)} exists")
            if if_match is not None and self._current(path) != if_match:
                raise PreconditionFailed(f"{self.where(key)} changed (or vanished) since it was read")
            try:
                # Other runners' users read the state; secrets stay the owner's. Objects are made
                # durable together (``sync``) before the manifest that names them, not one by one.
                parts = Path(key).parts
                mode = 0o600 if "secrets" in parts else 0o644
                write_atomic_bytes(path, data, mode, sync_dir="objects" not in parts)
            except OSError as exc:
                raise self._unreachable(f"cannot write {key} ({exc.strerror})") from None
        return version_of(data)

    def delete(self, key: str, *, if_match: str | None = None) -> None:
        path = self._path(key)
        with self._exclusive():
            if if_match is not None and self._current(path) != if_match:
                raise PreconditionFailed(f"{self.where(key)} changed (or vanished) since it was read")
            path.unlink(missing_ok=True)

    def sync(self, prefix: str) -> None:
        folder = self._path(prefix)
        if folder.is_dir():
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        return sorted(
            str(p.relative_to(self.root))
            for p in base.rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )
