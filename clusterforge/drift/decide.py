"""Converge or skip, per node: pure code over what the last converge recorded and what is true now.

A node is skipped only when all of this holds: its last configure succeeded and recorded a
baseline; its inputs (the roles' files and variables it receives, the playbooks, the rendered
inventory: ``clusterforge.plan.inputs`` fingerprints, plus what its roles declare they manage)
are those of the baseline; and its digest was gathered now and equals the baseline's. Anything
else converges, with the reason: first converge, inputs changed (which), drift (which items), or
a digest that could not be gathered (never assumed clean).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clusterforge.drift.digest import Gathered, item_changes

BASELINE_VERSION = 1


@dataclass(frozen=True)
class Baseline:
    """What a node was converged with and how it looked right after (journal ``drift`` field)."""

    at: str  # ISO time of the converge
    inputs: dict[str, str]  # part -> fingerprint: "role <name>", "playbooks", "inventory", "managed"
    items: dict[str, str]  # digest: "<kind> <name>" -> state

    def to_dict(self) -> dict[str, Any]:
        return {"version": BASELINE_VERSION, "at": self.at, "inputs": self.inputs, "items": self.items}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Baseline | None:
        if not data or data.get("version") != BASELINE_VERSION:
            return None
        return cls(
            str(data.get("at", "")),
            {str(k): str(v) for k, v in (data.get("inputs") or {}).items()},
            {str(k): str(v) for k, v in (data.get("items") or {}).items()},
        )


@dataclass(frozen=True)
class Decision:
    converge: bool
    why: str  # one line for the board and the summary
    # What differs, one phrase each (empty: nothing was known to compare, e.g. a first converge).
    changes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {"converge": self.converge, "why": self.why, "changes": list(self.changes)}


def input_changes(recorded: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """The input parts whose fingerprint differs (a role added or dropped counts)."""
    return sorted(k for k in set(recorded) | set(now) if recorded.get(k) != now.get(k))


def short_time(iso: str) -> str:
    """HH:MM of an ISO time (the baseline's), as said in "unchanged since 12:03"."""
    try:
        return datetime.fromisoformat(iso).strftime("%H:%M")
    except ValueError:
        return iso or "?"


def _listed(changes: list[str], limit: int = 3) -> str:
    return "; ".join(changes[:limit]) + (f"; … ({len(changes)} in all)" if len(changes) > limit else "")


def decide(
    baseline: Baseline | None,
    configured: bool,
    inputs_now: Mapping[str, str] | None,
    gathered: Gathered | None,
    force: bool = False,
) -> Decision:
    """Converge or skip one node. ``inputs_now`` None: the inputs could not be computed."""
    if force:
        return Decision(True, "--converge: full converge asked", ("--converge",))
    if baseline is None or not configured:
        return Decision(True, "no converged baseline recorded (first converge, or the last one failed)")
    if inputs_now is None:
        return Decision(True, "inputs not computed: converging")
    changed = input_changes(baseline.inputs, inputs_now)
    if changed:
        return Decision(True, f"inputs changed: {', '.join(changed)}", tuple(f"{c} changed" for c in changed))
    if gathered is None or not gathered.ok:
        why = gathered.error if gathered is not None else "not gathered"
        return Decision(
            True,
            f"digest not gathered ({why}): converging, not assumed clean",
            (f"digest not gathered: {why}",),
        )
    drift = item_changes(baseline.items, gathered.items)
    if drift:
        return Decision(True, f"drift: {_listed(drift)}", tuple(drift))
    return Decision(False, f"unchanged since {short_time(baseline.at)}, digest matches")
