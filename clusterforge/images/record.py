"""The baked images of a stack: ``<state>/<stack>/images.json``, one record per pool.

Written by `invoke image.bake` after the builder converged and passed its checks; read by the
provider (which image a pool with ``image: baked`` boots), by the inventory (the digest a node
must find in its image's record to skip the node software) and by `invoke plan` (stale images).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.images.digest import SoftwareDigest
from clusterforge.journal import stack_dir, write_atomic

SCHEMA = "clusterforge-images"
VERSION = 1
FILE = "images.json"


class ImageRecordError(Exception):
    """images.json cannot be used; the message names the file and the fix."""


@dataclass(frozen=True)
class ImageRecord:
    """One baked image: where it is, what it holds and how it was judged."""

    pool: str
    provider: str  # "local" | "aws"
    image: str  # local image tag, or AMI id
    software: SoftwareDigest
    built: str  # UTC ISO time
    builder: str = ""  # the builder machine (container name, instance id)
    checks: str = ""  # one line: the single-node checks' verdict on the builder
    items: int = 0  # how many managed items the image's own record lists
    notes: list[str] = field(default_factory=list)

    @property
    def digest(self) -> str:
        return self.software.digest

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "provider": self.provider,
            "image": self.image,
            **self.software.to_dict(),
            "built": self.built,
            "builder": self.builder,
            "checks": self.checks,
            "items": self.items,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ImageRecord:
        return cls(
            pool=str(data["pool"]),
            provider=str(data["provider"]),
            image=str(data["image"]),
            software=SoftwareDigest.from_dict(data),
            built=str(data.get("built", "")),
            builder=str(data.get("builder", "")),
            checks=str(data.get("checks", "")),
            items=int(data.get("items", 0)),
            notes=[str(n) for n in data.get("notes") or []],
        )


def records_path(stack: str) -> Path:
    return stack_dir(stack) / FILE


def load_records(stack: str, path: Path | None = None) -> dict[str, ImageRecord]:
    """pool -> its baked image; {} when nothing was baked. ImageRecordError on a file it cannot use."""
    path = path or records_path(stack)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != SCHEMA or data.get("version") != VERSION:
            raise ValueError(f"not a {SCHEMA} version {VERSION} file")
        return {pool: ImageRecord.from_dict(rec) for pool, rec in (data.get("pools") or {}).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ImageRecordError(
            f"{path}: cannot read the baked images ({exc}); remove it and run `invoke image.bake` again"
        ) from None


def save_record(stack: str, record: ImageRecord, path: Path | None = None) -> Path:
    """Add or replace ``record.pool``'s record (atomically)."""
    path = path or records_path(stack)
    records = load_records(stack, path)
    records[record.pool] = record
    body = {
        "schema": SCHEMA,
        "version": VERSION,
        "pools": {pool: rec.to_dict() for pool, rec in sorted(records.items())},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(body, indent=2, sort_keys=True) + "\n")
    return path
