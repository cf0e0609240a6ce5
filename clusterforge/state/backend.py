"""What every state backend offers: a few conditional operations on named objects.

A backend holds objects under keys such as ``prod/state.json``; each object has a version (S3's
ETag; the content's SHA-256 on a filesystem). Writes can be conditional: ``if_absent`` (S3
``If-None-Match: *``, an exclusive create on a filesystem) or ``if_match`` (S3 ``If-Match``, a
compare-and-swap under a lock on a filesystem). Everything above this interface, the stack lock
and the versioned state, is written once against it, so the S3 and the filesystem backends obey
the same rules and are tested with the same tests.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class Blob:
    data: bytes
    version: str


class BackendError(Exception):
    """A backend operation failed; the message names the backend and what to do."""


class Unreachable(BackendError):
    """The backend cannot be reached or used (network, credentials, missing bucket or folder)."""


class PreconditionFailed(BackendError):
    """A conditional write or delete found the object other than expected (S3: 412)."""


class Backend(ABC):
    """A place for a stack's state that every runner reaches."""

    url: str  # how a person names it: s3://bucket/prefix, /shared/clusterforge-state

    def where(self, key: str) -> str:
        return f"{self.url.rstrip('/')}/{key}"

    @abstractmethod
    def check(self) -> None:
        """Raise ``Unreachable`` (naming the backend and the fix) unless it can be used now."""

    @abstractmethod
    def get(self, key: str) -> Blob | None:
        """The object, or None when there is none."""

    @abstractmethod
    def put(self, key: str, data: bytes, *, if_match: str | None = None, if_absent: bool = False) -> str:
        """Write the object and return its new version; ``PreconditionFailed`` when a condition fails."""

    @abstractmethod
    def delete(self, key: str, *, if_match: str | None = None) -> None:
        """Remove the object (absent is fine without ``if_match``)."""

    @abstractmethod
    def list(self, prefix: str) -> list[str]:
        """Keys under ``prefix`` (relative to the backend, as given to ``get``)."""

    def sync(self, prefix: str) -> None:  # noqa: B027 - optional: a no-op where writes are durable at once
        """Make the writes under ``prefix`` durable before a write that names them (the manifest)."""
