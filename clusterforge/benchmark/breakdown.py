"""Step-time breakdown, throughput and scaling efficiency of one training run (pure).

In synchronous data-parallel training every step ends in the gradient all-reduce, so the step
takes as long as its slowest rank's path to it. Per step, the *critical rank* is the last to
arrive at that synchronisation: the one that waited least for it (smallest ``exposed_comm``;
ties: most work). Its parts are the step's breakdown: its exposed communication is the
communication compute did not hide (it waited for no one), its data wait and compute are what
everyone else waited for. The other ranks' extra wait is not counted twice.

Parts (mean seconds per step, over the measured steps; they sum to the mean step time):
compute (forward + backward up to the last gradient bucket), exposed communication, data-loader
wait, optimizer, checkpoint save (amortised over the steps), and ``other`` (the loop's own time).
Step time median and p95 are of the critical rank's wall-clock steps (nearest-rank percentile).

Throughput: ranks x tokens per rank per step / median step time. Scaling efficiency at N nodes:
per-rank throughput against the single-node run's (weak scaling: the per-rank batch is fixed).
MFU (GPUs): model FLOPs per token (PaLM's accounting) x tokens/s over ranks x the device's dense
bf16 peak.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from clusterforge.benchmark.records import RankRun, Step

PARTS = ("compute", "exposed_comm", "data_wait", "optimizer", "checkpoint", "other")
LABELS = {
    "compute": "compute (forward/backward)",
    "exposed_comm": "exposed communication",
    "data_wait": "data-loader wait",
    "optimizer": "optimizer",
    "checkpoint": "checkpoint save",
    "other": "other (loop overhead)",
}
# A rank's own time per step: everything but waiting at the synchronisation.
OWN_PARTS = ("compute", "data_wait", "optimizer", "checkpoint")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    ordered = sorted(values)
    k = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(k, len(ordered)) - 1]


def part_of(step: Step, part: str) -> float:
    if part == "compute":
        return step.compute
    if part == "other":
        return max(0.0, step.step - sum(part_of(step, p) for p in PARTS[:-1]))
    return float(getattr(step, part))


@dataclass(frozen=True)
class Breakdown:
    parts: dict[str, float]  # part -> mean seconds per step

    @property
    def step(self) -> float:
        return sum(self.parts.values())

    def share(self, part: str) -> float:
        total = self.step
        return self.parts.get(part, 0.0) / total if total > 0 else 0.0


@dataclass(frozen=True)
class RankStats:
    rank: int
    node: str
    steps: int
    own: float  # median seconds per step of everything but the wait at the synchronisation
    parts: dict[str, float]  # median seconds per step of each part
    critical_share: float  # fraction of the steps on which this rank was the last to arrive


@dataclass(frozen=True)
class SlowRank:
    rank: int
    node: str
    ratio: float  # its own time per step / the median of its peers'
    cause: str  # the part that exceeds the peers' the most (a key of LABELS)
    own: float
    peers: float
    cause_value: float
    cause_peers: float


@dataclass(frozen=True)
class TrainPoint:
    nodes: int
    ranks: int
    node_names: tuple[str, ...]
    steps: int
    tokens_per_s: float
    step_median: float
    step_p95: float
    breakdown: Breakdown
    comm_total: float | None  # mean seconds per step of all-reduce, hidden or not (gloo only)
    comm_hidden: float | None  # fraction of that hidden behind compute
    ranks_stats: tuple[RankStats, ...]
    slow_rank: SlowRank | None
    mfu: float | None = None
    efficiency: float | None = None  # set by with_efficiency
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def tokens_per_s_per_rank(self) -> float:
        return self.tokens_per_s / self.ranks if self.ranks else 0.0


def aligned_steps(ranks: Sequence[RankRun]) -> list[list[Step]]:
    """Per measured step index present on every rank, each rank's record (rank order)."""
    by_rank = [{s.i: s for s in r.measured} for r in ranks]
    common = sorted(set.intersection(*(set(d) for d in by_rank))) if by_rank else []
    return [[d[i] for d in by_rank] for i in common]


def critical_index(steps: Sequence[Step]) -> int:
    """The rank that arrived last at the step's synchronisation (waited least; ties: most work)."""
    return min(range(len(steps)), key=lambda k: (round(steps[k].exposed_comm, 6), -steps[k].work, k))


def analyse(
    ranks: Sequence[RankRun],
    nodes: int,
    tokens_per_rank_step: int,
    *,
    flops_per_token: float | None = None,
    peak_flops_per_rank: float | None = None,
    slow_gap: float = 0.25,
) -> TrainPoint:
    """One run's figures from its ranks' records (each with at least one measured step)."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    rows = aligned_steps(ranks)
    if not rows:
        raise ValueError("no measured step is present on every rank")
    critical = [row[critical_index(row)] for row in rows]
    crit_rank = [critical_index(row) for row in rows]
    parts = {p: statistics.fmean(part_of(s, p) for s in critical) for p in PARTS}
    walls = [s.step for s in critical]
    step_median = statistics.median(walls)
    tokens_per_s = len(ranks) * tokens_per_rank_step / step_median if step_median > 0 else 0.0
    comms = [s.comm for s in critical]
    comm_total = (
        statistics.fmean(c for c in comms if c is not None) if all(c is not None for c in comms) else None
    )
    hidden = None
    if comm_total:
        hidden = max(0.0, min(1.0, 1 - parts["exposed_comm"] / comm_total))
    stats = tuple(
        RankStats(
            r.rank,
            r.node,
            len(rows),
            statistics.median(row[k].step - row[k].exposed_comm for row in rows),
            {p: statistics.median(part_of(row[k], p) for row in rows) for p in PARTS},
            crit_rank.count(k) / len(rows),
        )
        for k, r in enumerate(ranks)
    )
    mfu = None
    if flops_per_token and peak_flops_per_rank:
        mfu = tokens_per_s * flops_per_token / (len(ranks) * peak_flops_per_rank)
    return TrainPoint(
        nodes=nodes,
        ranks=len(ranks),
        node_names=tuple(dict.fromkeys(r.node for r in ranks)),
        steps=len(rows),
        tokens_per_s=tokens_per_s,
        step_median=step_median,
        step_p95=percentile(walls, 95),
        breakdown=Breakdown(parts),
        comm_total=comm_total,
        comm_hidden=hidden,
        ranks_stats=stats,
        slow_rank=slow_rank(stats, slow_gap),
        mfu=mfu,
    )


def median_without(ordered: Sequence[float], value: float) -> float:
    """The median of ``ordered`` (sorted, holding ``value``) without one occurrence of ``value``,
    in O(log n): every rank is held against its peers without an O(ranks^2) loop."""
    k = bisect.bisect_left(ordered, value)
    n = len(ordered) - 1

    def at(i: int) -> float:
        return ordered[i if i < k else i + 1]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def slow_rank(stats: Sequence[RankStats], gap: float) -> SlowRank | None:
    """The rank whose own time per step is more than ``gap`` over its peers' median, if any (the
    worst one); its cause is the part it spends the most seconds over its peers on."""
    if len(stats) < 2:
        return None
    owns = sorted(s.own for s in stats)
    parts = {p: sorted(s.parts[p] for s in stats) for p in OWN_PARTS}
    worst: SlowRank | None = None
    for s in stats:
        peer_own = median_without(owns, s.own)
        if peer_own <= 0 or s.own < (1 + gap) * peer_own:
            continue
        peers = {p: median_without(parts[p], s.parts[p]) for p in OWN_PARTS}
        cause = max(OWN_PARTS, key=lambda p: s.parts[p] - peers[p])
        found = SlowRank(
            s.rank, s.node, s.own / peer_own, cause, s.own, peer_own, s.parts[cause], peers[cause]
        )
        if worst is None or found.ratio > worst.ratio:
            worst = found
    return worst


def with_efficiency(points: Sequence[TrainPoint]) -> list[TrainPoint]:
    """Scaling efficiency of every point against the single-node one (None without it)."""
    from dataclasses import replace

    base = next((p for p in points if p.nodes == 1), None)
    out = []
    for p in sorted(points, key=lambda q: q.nodes):
        eff = None
        if base is not None and base.tokens_per_s_per_rank > 0:
            eff = p.tokens_per_s_per_rank / base.tokens_per_s_per_rank
        out.append(replace(p, efficiency=eff))
    return out
