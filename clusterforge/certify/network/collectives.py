"""One figure per group from several collectives (the GPU path: all_reduce, all_gather, alltoall).

The planner (planner.py) judges one figure per group against one reference per group size. A node
whose alltoall is slow while its all_reduce is not must still fail, so the runner judges every
collective of a group against that collective's own reference and hands the planner the worst:

    figure = R[primary] x min over collectives c of (busbw[c] / R[c])

the worst ratio to reference, in the primary collective's unit (all_reduce GB/s), so the planner's
own references (the stored 2-node baseline, this run's median) keep their meaning. R[c] for a group
size: the stored baseline of c, else the fleet reference of this run's figures of c at that size
(``isolate_evidence.fleet_reference``, once ``min_fleet_figures`` of them exist), frozen when first
known so every figure of a run is measured with the same yardstick. A collective without a
reference yet is not judged: the figure is then the primary's busbw alone, the figure the runner
fed the planner before there were several collectives (gloo never gets here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from clusterforge.certify.network.evidence import fleet_reference


@dataclass(frozen=True)
class CollectiveReference:
    collective: str
    size: int
    value: float
    source: str  # "baseline" | "fleet median of N"

    def describe(self) -> str:
        where = "baseline" if self.source == "baseline" else f"{self.size}-node {self.source}"
        return f"{self.value:.3g} GB/s ({where})"


@dataclass(frozen=True)
class Worst:
    """The collective whose figure is furthest under its reference in one group."""

    collective: str
    busbw: float | None  # None: the run of that collective gave no figure
    reference: float
    source: str
    ratio: float  # busbw / reference (0 without a figure)

    @property
    def gap_pct(self) -> float:
        return (1 - self.ratio) * 100


class CollectiveReferences:
    """References per (collective, group size) over a run, and each group's figure for the planner."""

    def __init__(
        self,
        collectives: Iterable[str],
        baseline: Mapping[tuple[str, int], float] | None = None,
        fail_gap: float = 0.15,
        min_fleet_figures: int = 3,
    ) -> None:
        self.collectives = list(dict.fromkeys(collectives))
        if not self.collectives:
            raise ValueError("CollectiveReferences: name at least one collective")
        self.primary = self.collectives[0]
        self.fail_gap = fail_gap
        self.min_fleet_figures = min_fleet_figures
        self.refs: dict[tuple[str, int], CollectiveReference] = {
            (c, size): CollectiveReference(c, size, float(v), "baseline")
            for (c, size), v in (baseline or {}).items()
            if v and v > 0
        }

    def update(self, groups: Iterable[tuple[int, Mapping[str, float | None]]]) -> None:
        """Fix the fleet reference of each (collective, size) that has none and now has enough
        figures: ``groups`` is every judged group so far as (size, {collective: busbw})."""
        values: dict[tuple[str, int], list[float]] = {}
        for size, figures in groups:
            for c, v in figures.items():
                if v is not None:
                    values.setdefault((c, size), []).append(v)
        for key, vs in values.items():
            if key not in self.refs and len(vs) >= self.min_fleet_figures:
                self.refs[key] = CollectiveReference(
                    key[0], key[1], fleet_reference(vs, self.fail_gap), f"fleet median of {len(vs)}"
                )

    def judge(self, size: int, figures: Mapping[str, float | None]) -> tuple[float | None, Worst | None]:
        """(figure for the planner, the worst collective) of one group's {collective: busbw}."""
        if all(figures.get(c) is None for c in self.collectives):
            return None, None  # nothing measured: no result, as a group without a report
        primary = self.refs.get((self.primary, size))
        ratios = []
        for c in self.collectives:
            ref = self.refs.get((c, size))
            if ref is not None:
                busbw = figures.get(c)
                ratios.append(Worst(c, busbw, ref.value, ref.source, (busbw or 0.0) / ref.value))
        worst = min(ratios, key=lambda w: w.ratio) if ratios else None
        if primary is None or worst is None:
            # Not expressible in the primary's unit yet: its own figure (0 when its run gave none).
            return figures.get(self.primary) or 0.0, worst
        return primary.value * worst.ratio, worst

    def as_dict(self) -> dict[str, dict[str, dict[str, object]]]:
        """{size: {collective: reference}} for network-groups.json."""
        out: dict[str, dict[str, dict[str, object]]] = {}
        for (c, size), ref in sorted(self.refs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            out.setdefault(str(size), {})[c] = asdict(ref)
        return out


def baseline_metric(collective: str | None, size: int = 2) -> str:
    """The stored baseline's metric of a collective's group figure. all_reduce (and gloo, no
    collective) keep the name the network baseline always had."""
    if collective in (None, "all_reduce"):
        return f"network.{size}node.busbw"
    return f"network.{size}node.{collective}.busbw"


def collective_reason(
    check: str, node: str, records: Iterable[object], fail_gap: float
) -> tuple[str, str] | None:
    """(collective, one line) for a node the planner failed: the collective of its group tests
    that fell ``fail_gap`` or more under its reference most often (then furthest), with the
    figures, the partners and the reference; None when no collective did (the planner's own
    reason stands). ``records``: GroupRecords (nodes, purpose, worst); a confirmation counts for
    the node it tests only."""
    under: dict[str, list[tuple[Worst, list[str]]]] = {}
    for r in records:
        worst = getattr(r, "worst", None)
        nodes = list(getattr(r, "nodes", []))
        purpose = getattr(r, "purpose", "")
        if purpose == "scale" or node not in nodes or not isinstance(worst, Worst):
            continue
        if purpose == "confirm" and nodes[0] != node:
            continue  # a known-good partner there, not under test (isolate_evidence.subjects)
        if worst.ratio < 1 - fail_gap:
            under.setdefault(worst.collective, []).append((worst, [n for n in nodes if n != node]))
    if not under:
        return None
    collective, hits = min(under.items(), key=lambda kv: (-len(kv[1]), min(w.ratio for w, _ in kv[1])))
    hits = sorted(hits, key=lambda h: h[0].ratio)[:2]
    parts = [
        f"{'no figure' if w.busbw is None else f'{w.busbw:.3g} GB/s'} with {'+'.join(partners)}"
        for w, partners in hits
    ]
    w = hits[0][0]
    ref = CollectiveReference(collective, len(hits[0][1]) + 1, w.reference, w.source)
    return collective, (
        f"{check}: {collective} {' and '.join(parts)}, {w.gap_pct:.0f} % under the reference {ref.describe()}"
    )
