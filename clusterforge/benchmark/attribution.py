"""Which part limits the training step, in one line a person can act on (pure).

Rules, in order, for one run (one node count):
1. A slow rank (its own time per step ``slow_gap`` over its peers' median): the limit is that
   rank's cause (compute, data-loader wait, optimizer, checkpoint), named with its rank and
   node: the other ranks wait for it in the all-reduce.
2. Else the largest part of the step other than compute, when it takes at least
   ``limit_share`` of the step: exposed communication, data-loader wait, optimizer, checkpoint
   or the loop's own overhead.
3. Else compute: the step is compute-bound, which is what a well-fed, well-connected cluster
   shows.
The line also gives the scaling efficiency against one node, and how much the limiting part
grew from the single-node run where there is one, e.g.
``at 4 nodes, exposed communication is 31 % of the step (0.12 s, +0.11 s from 1 node); efficiency 0.72``.
An efficiency above ``SUPERLINEAR`` says so: more nodes cannot make a rank faster than it ran
alone, so the single-node reference was slowed (a busy host, a cold cache) and the figure is not
one to compare or gate on. The run's verdict is the limit at its largest node count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clusterforge.benchmark.breakdown import LABELS, PARTS, TrainPoint

LIMIT_SHARE = 0.15
SUPERLINEAR = 1.05  # efficiency over this: the 1-node reference ran slow (noise), not a faster rank


def _efficiency(point: TrainPoint) -> str:
    if point.efficiency is None or point.nodes <= 1:
        return ""
    text = f"; efficiency {point.efficiency:.2f}"
    if point.efficiency > SUPERLINEAR:
        text += " (above 1: the 1-node reference ran slower per rank, e.g. on a busy host; re-run before comparing)"
    return text


@dataclass(frozen=True)
class Limit:
    nodes: int
    part: str  # a key of breakdown.LABELS
    share: float  # of the step
    seconds: float  # mean per step
    line: str
    rank: int | None = None  # a slow rank's
    node: str | None = None

    @property
    def short(self) -> str:
        """For a table cell: ``exposed communication 39 %`` or ``slow rank 1 (node-002): compute``."""
        if self.rank is not None:
            return f"slow rank {self.rank} ({self.node}): {LABELS[self.part]}"
        return f"{LABELS[self.part]} {100 * self.share:.0f} %"

    @property
    def label(self) -> str:
        return LABELS[self.part]


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _growth(point: TrainPoint, base: TrainPoint | None, part: str) -> str:
    if base is None or base is point:
        return ""
    delta = point.breakdown.parts[part] - base.breakdown.parts[part]
    return f", {delta:+.3g} s from 1 node"


def limit_of(point: TrainPoint, base: TrainPoint | None = None, limit_share: float = LIMIT_SHARE) -> Limit:
    b = point.breakdown
    where = f"at {point.nodes} node{'s' if point.nodes != 1 else ''}"
    eff = _efficiency(point)
    slow = point.slow_rank
    if slow is not None:
        part = slow.cause
        line = (
            f"{where}, rank {slow.rank} ({slow.node}) is the slow rank: {slow.ratio:.1f}x its peers' own time per "
            f"step ({slow.own:.3g} s against {slow.peers:.3g} s), from {LABELS[part]} ({slow.cause_value:.3g} s "
            f"against {slow.cause_peers:.3g} s); the other ranks wait for it in the all-reduce{eff}"
        )
        return Limit(point.nodes, part, b.share(part), b.parts[part], line, slow.rank, slow.node)
    others = [p for p in PARTS if p != "compute"]
    part = max(others, key=lambda p: b.parts[p])
    if b.share(part) < limit_share:
        part = "compute"
    seconds = b.parts[part]
    line = (
        f"{where}, {LABELS[part]} is {_pct(b.share(part))} of the step ({seconds:.3g} s of "
        f"{b.step:.3g} s{_growth(point, base, part)}){eff}"
    )
    if part == "compute":
        line += ": compute-bound"
    return Limit(point.nodes, part, b.share(part), seconds, line)


def limits(points: Sequence[TrainPoint], limit_share: float = LIMIT_SHARE) -> list[Limit]:
    base = next((p for p in points if p.nodes == 1), None)
    return [limit_of(p, base, limit_share) for p in sorted(points, key=lambda q: q.nodes)]


def verdict(found: Sequence[Limit]) -> Limit | None:
    """The limit at the largest node count that ran."""
    return max(found, key=lambda lim: lim.nodes) if found else None
