"""Which idle nodes the scheduled active check takes now.

Idle nodes only (a user job always wins the node), at most ``max_nodes`` at once counting checks
already running, only nodes whose last check is older than ``every``, oldest-checked first (never
checked counts as oldest). O(N log k) for N nodes and k taken (a heap, not a sort).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from clusterforge.spec.health import ActiveChecks


@dataclass(frozen=True)
class Candidate:
    name: str
    idle: bool  # Slurm: IDLE, not drained, no job, no reservation
    last_checked: float | None  # seconds since the epoch of its last active (or full) check
    checking: bool = False  # an active check holds it now


def choose(nodes: Sequence[Candidate], policy: ActiveChecks, now: float) -> list[str]:
    """Names to check now, oldest-checked first; [] when the policy schedules none."""
    if policy.profile is None:
        return []
    running = sum(1 for n in nodes if n.checking)
    room = policy.limit(len(nodes)) - running
    if room <= 0:
        return []
    every = policy.every_s
    due = (
        n
        for n in nodes
        if n.idle and not n.checking and (n.last_checked is None or now - n.last_checked >= every)
    )
    taken = heapq.nsmallest(
        room, due, key=lambda n: (n.last_checked if n.last_checked is not None else float("-inf"), n.name)
    )
    return [n.name for n in taken]
