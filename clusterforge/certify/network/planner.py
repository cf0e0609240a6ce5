"""Find the node or link that slows the fabric: a pure planner of group tests (no I/O).

A runner asks for a round, runs every group of it concurrently (one job per group, its nodes only,
each with a deadline), records each group's figure (bus bandwidth; None when the job hung, was
cancelled or lost a node), and asks again until the planner says it is done:

    planner = Planner(nodes, topology={"node-001": "rack-1", ...}, rules=IsolationRules(baseline={2: 0.45}))
    while (groups := planner.next_round()) is not None:
        for group in groups:
            planner.record(group, busbw_or_none)
    result = planner.verdicts()   # IsolationResult: node_verdicts, link_verdicts, rounds, jobs, problem

Plan (adaptive group testing; cf. Google cluster-health-scanner's pair / re-pair and NVIDIA Cluster
Readiness Engine ADR-055, REFERENCE.md). Round 1 pairs every node (a perfect matching, within
topology groups first): at most N/2 concurrent jobs. Both nodes of a failing pair are suspects; a
passing pair proves both nodes free of node faults. From round 2 each suspect is paired with a
different known-good node each round until two good partners have judged it: failing with both is a
node fault (no figure at all: dead); passing with both clears it. A pair that failed although both
nodes pass with others is a link candidate: it is run again, and a failure that repeats is a link
fault naming both nodes, one that does not is flaky. When no partner is left, a group that failed
between nodes that never passed anywhere runs once more before they are left undetermined
(schedule.stalemate_retests): a fault fails again, a passing disturbance does not. With d node faults and a few link faults this
takes 3 rounds, 4 when a link is retested (benchmarks/isolate.py), at N >= 64 and d <= 16. While
few nodes still need a test (a small fleet with many faults, good partners scarce) the round is
chosen by looking one round ahead over the fault hypotheses (isolate_search.py); at N = 8 with
d = 4 it still takes up to 6 rounds, and some such fleets cannot be done in 4 by any plan of
disjoint pairs (the benchmark's round_floor says which).

Figures are judged against the reference for the group size: a stored baseline, or the median of
this run's figures of that size (needs IsolationRules.min_fleet_figures of them: at 2 nodes without
a baseline nothing can be judged, and the verdicts say so).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from clusterforge.certify.network.evidence import Evidence, collect
from clusterforge.certify.network.model import (
    IsolationResult,
    IsolationRules,
    LinkVerdict,
    NodeVerdict,
    Reference,
    TestGroup,
)
from clusterforge.certify.network.reasons import fig, one_line
from clusterforge.certify.network.schedule import plan_round, stalemate_retests

__all__ = [
    "IsolationResult",
    "IsolationRules",
    "LinkVerdict",
    "NodeVerdict",
    "Planner",
    "Reference",
    "TestGroup",
]


class Planner:
    """Rounds of disjoint group tests over `nodes`, then a verdict per node and per link.

    topology: node -> label (placement group, rack or NVLink domain; any string): partners are
        chosen within a label first. known_good: certified nodes lent as partners (they get no
        verdict); with them even 2 new nodes can be told apart.
    """

    def __init__(
        self,
        nodes: Iterable[str],
        topology: Mapping[str, str] | None = None,
        rules: IsolationRules | None = None,
        known_good: Iterable[str] = (),
    ) -> None:
        self.nodes: list[str] = list(dict.fromkeys(nodes))
        self.known_good: list[str] = [n for n in dict.fromkeys(known_good)]
        both = sorted(set(self.nodes) & set(self.known_good))
        if both:
            raise ValueError(
                f"Planner: {', '.join(both)} both under test and lent as known_good; name each once"
            )
        self.topology: dict[str, str] = dict(topology or {})
        self.rules = rules or IsolationRules()
        self.round = 0
        self._records: list[tuple[TestGroup, float | None]] = []
        self._pending: set[TestGroup] = set()
        self._done = False

    # ---- the loop ----

    def next_round(self) -> list[TestGroup] | None:
        """The groups of the next round, or None when the verdicts are final."""
        if self._pending:
            missing = "; ".join(" ".join(g.nodes) for g in sorted(self._pending, key=lambda g: g.nodes)[:5])
            raise RuntimeError(
                f"round {self.round}: record every group before the next round (missing: {missing}); "
                "record None for a job that hung, was cancelled or lost a node"
            )
        if self._done or self.round >= self.rules.max_rounds:
            self._done = True
            return None
        ev = self._evidence()
        groups = plan_round(ev, self.nodes, self.known_good, self.topology, self.round + 1, self.rules)
        if not groups:  # no partner left: a failure nobody can attribute is run again first
            groups = stalemate_retests(ev, self._records, self.rules, self.round + 1)
        if not groups:
            self._done = True
            return None
        self.round += 1
        self._pending = set(groups)
        return groups

    def record(self, group: TestGroup, figure: float | None) -> None:
        """The group's measured figure (busbw in rules.unit), or None: no result."""
        if group not in self._pending:
            raise ValueError(
                f"record: group {' '.join(group.nodes)} (round {group.round}) is not an unrecorded group of "
                f"round {self.round}; record each group next_round() returned, once"
            )
        if figure is not None and (isinstance(figure, bool) or not math.isfinite(figure) or figure < 0):
            raise ValueError(f"record: figure {figure!r} for {' '.join(group.nodes)}: a number >= 0, or None")
        self._pending.discard(group)
        self._records.append((group, None if figure is None else float(figure)))

    def verdicts(self) -> IsolationResult:
        """Final (or, mid-run, provisional) verdicts: unresolved nodes are `undetermined`, with why."""
        ev = self._evidence()
        verdicts = dict(ev.verdicts)
        problem = self._problem(ev)
        for node in self.nodes:
            if node not in verdicts:
                verdicts[node] = self._unresolved(ev, node, problem)
        return IsolationResult(
            node_verdicts={n: verdicts[n] for n in self.nodes},
            link_verdicts=sorted(ev.links, key=lambda v: v.nodes),
            rounds=self.round,
            jobs=len(self._records),
            references=dict(ev.references),
            problem=problem,
        )

    @property
    def records(self) -> list[tuple[TestGroup, float | None]]:
        return list(self._records)

    # ---- helpers ----

    def _evidence(self) -> Evidence:
        return collect(self.nodes, self.known_good, self._records, self.rules)

    def _problem(self, ev: Evidence) -> str | None:
        total = len(self.nodes) + len(self.known_good)
        healthy = len(ev.good)
        if total < 2:
            return "the network cannot be certified: a network test needs at least 2 nodes, got " + str(total)
        if 2 not in ev.references and self._records:
            return (
                f"the network cannot be certified: {sum(1 for g, f in self._records if f is not None)} 2-node "
                f"figure(s) and no stored baseline; the fleet median needs {self.rules.min_fleet_figures} "
                "(give IsolationRules.baseline for 2-node groups, or test more nodes)"
            )
        if healthy < 2 and self._records:
            return (
                f"the network cannot be certified: {healthy} of {total} nodes passed any group test; "
                "localising a fault needs at least 2 healthy nodes (or a certified node lent as known_good)"
            )
        return None

    def _unresolved(self, ev: Evidence, node: str, problem: str | None) -> NodeVerdict:
        check = self.rules.check
        results = ev.results.get(node, [])
        waiting = ev.waiting.get(node, "not tested")
        # Partners ran out. A pass proves a node free of node faults; one whose every failure was
        # with a partner that never passed anywhere is healthy on that evidence (said in its reason).
        never_passed = set(self.nodes) - ev.good
        passes = [r for r in results if r.outcome == "pass"]
        fails = [r for r in results if r.outcome in ("fail", "none")]
        if passes and (node not in ev.suspects or all(r.others & never_passed for r in fails)):
            first = passes[0]
            why = (
                "failed only as the known-good partner of a node under test"
                if node not in ev.suspects
                else f"failed only with nodes that never passed ({len(passes)} good partner(s), no other left)"
            )
            return NodeVerdict(
                node,
                "pass",
                one_line(
                    f"{check}: {fig(first.figure, self.rules.unit)} with {'+'.join(sorted(first.others))}, "
                    f"reference {ev.reference_text(first.group.size, self.rules.unit)}; {why}"
                ),
            )
        if len(self.nodes) == 2 and not self.known_good and results and 2 in ev.references:
            other = next(n for n in self.nodes if n != node)
            figures = [r.figure for r in results if r.figure is not None]
            runs = f" (best of {len(results)} runs)" if len(results) > 1 else ""
            return NodeVerdict(
                node,
                "undetermined",
                one_line(
                    f"{check}: {fig(max(figures) if figures else None, self.rules.unit)}{runs} with {other}, reference "
                    f"{ev.reference_text(2, self.rules.unit)}: cannot tell which of the two is at fault without a "
                    "third, known-good node (Planner known_good)"
                ),
            )
        if problem:
            return NodeVerdict(node, "undetermined", one_line(f"{check}: {problem}"))
        return NodeVerdict(
            node, "undetermined", one_line(f"{check}: not certified after {self.round} round(s): {waiting}")
        )
