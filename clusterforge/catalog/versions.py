"""Dotted version strings compared as integer tuples (570.133.20 > 570.86.15)."""

from __future__ import annotations

import re

_PART = re.compile(r"^\d+$")


def vtuple(version: str) -> tuple[int, ...]:
    """``"12.8.1"`` -> ``(12, 8, 1)``. Raises ValueError on anything that is not dotted digits."""
    parts = str(version).strip().split(".")
    if not parts or not all(_PART.match(p) for p in parts):
        raise ValueError(f"not a dotted version: {version!r}")
    return tuple(int(p) for p in parts)


def vcmp(a: str, b: str) -> int:
    """-1, 0 or 1; missing trailing parts count as 0 (12.8 == 12.8.0)."""
    ta, tb = vtuple(a), vtuple(b)
    width = max(len(ta), len(tb))
    ta += (0,) * (width - len(ta))
    tb += (0,) * (width - len(tb))
    return (ta > tb) - (ta < tb)


def at_least(version: str, minimum: str) -> bool:
    return vcmp(version, minimum) >= 0


def major_minor(version: str) -> str:
    """``"12.8.1"`` -> ``"12.8"``; ``"24.05.7"`` -> ``"24.05"`` (keeps Slurm's zero padding)."""
    parts = str(version).split(".")
    return ".".join(parts[:2])


def major(version: str) -> int:
    return vtuple(version)[0]
