"""Plan one round of disjoint groups from the evidence so far (pure; used by planner.py).

Every node is in at most one group per round (one Slurm job per group, run concurrently). Order of
claims on the nodes: retests of link candidates first (both nodes must be free), then every node
that needs a group with a new known-good partner (suspects first), and last the nodes no good
partner could be found for, paired among themselves with partners they have not met: that is round
1 (nobody is known good yet), and the fallback when good nodes are scarce. Round 1 pairs the nodes
under test among themselves even when certified nodes are lent as partners (a re-certification of
a few nodes), so the links between them are tested too; lent nodes take the odd one out. Partners are taken from
the same topology group (rack, placement group, NVLink domain) first, so a figure compares like
with like, and each good node serves one suspect per round. While few nodes still need a test
(a small fleet with many faults) the round comes from isolate_search.py instead, which scores every
matching against the fault hypotheses; nodes with a link-fault verdict serve as partners too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence

from clusterforge.certify.network.evidence import Evidence, judge_figure
from clusterforge.certify.network.model import IsolationRules, Purpose, TestGroup
from clusterforge.certify.network.search import search_round

_PARTNERS = ("pass", "link-fault")


class _Pool:
    """Free good partners bucketed by topology label; take() prefers the asker's own label."""

    def __init__(self, nodes: Sequence[str], label: Mapping[str, str]) -> None:
        self.label = label
        self.buckets: dict[str, list[str]] = defaultdict(list)
        for node in reversed(nodes):  # pop() from the end gives the nodes in their given order
            self.buckets[label.get(node, "")].append(node)

    def take(self, asker: str, avoid: Collection[str], skip: Collection[str], busy: set[str]) -> str | None:
        own = self.label.get(asker, "")
        order = [own] + [b for b in self.buckets if b != own]
        for name in order:
            bucket = self.buckets.get(name, [])
            for i in range(len(bucket) - 1, -1, -1):
                node = bucket[i]
                if node in busy:
                    bucket.pop(i)
                    continue
                if node != asker and node not in avoid and node not in skip:
                    bucket.pop(i)
                    return node
        return None


def plan_round(
    ev: Evidence,
    nodes: Sequence[str],
    known_good: Sequence[str],
    label: Mapping[str, str],
    round_no: int,
    rules: IsolationRules | None = None,
) -> list[TestGroup]:
    busy: set[str] = set()
    groups: list[TestGroup] = []
    for key in ev.retests:
        if not key & busy:
            groups.append(TestGroup(tuple(sorted(key)), round_no, "retest"))
            busy |= key
    needy = [n for n in ev.needy if n not in busy]
    # Never-passed suspects claim partners first, then good nodes short of a confirmation, then the untested.
    needy.sort(key=lambda n: (n in ev.good, ev.waiting.get(n) == "not tested"))
    never_passed = {n for n in ev.needy if n not in ev.good}
    # Partners: one pass proves a node free of node faults. Never-failed nodes first, then cleared
    # ones, then good nodes waiting on a retest, then good nodes that still need a confirmation.
    # A link-fault verdict is about one pair: the node passed with two good partners and serves others.
    cleared = [
        n for n in nodes if n in ev.verdicts and ev.verdicts[n].kind in _PARTNERS and n not in ev.clean
    ]
    needing = set(ev.needy)
    waiting = [n for n in nodes if n in ev.good and n not in ev.verdicts and n not in needing]
    short = [n for n in ev.needy if n in ev.good]
    partners = [*known_good, *[n for n in nodes if n in ev.clean], *cleared, *waiting, *short]
    if rules is not None and round_no > 1:
        pairs = search_round(
            ev, nodes, known_good, rules, needy, partners, busy,
            lambda a, b: b not in ev.tried[a], label,
        )  # fmt: skip
        if pairs is not None:
            for a, b in pairs:
                if a in ev.good and b not in ev.good:
                    a, b = b, a  # the never-passed node is the one under test
                purpose: Purpose = "confirm" if b in ev.good else "screen"
                groups.append(TestGroup((a, b), round_no, purpose))
            return groups
    pool = _Pool(partners, label)
    left: list[str] = []
    if round_no == 1 and known_good:
        # Nodes under test meet each other first, as in a whole-fleet run: a link between two of
        # them is tested only in a pair of both (lent partners alone never test it). A passing pair
        # clears both in one round; the odd node takes a lent partner below.
        groups.extend(_pair_among(needy, ev, label, busy, round_no))
    for node in needy:
        if node in busy:
            continue
        partner = pool.take(node, ev.tried[node], never_passed, busy)
        if partner is None:
            left.append(node)
            continue
        groups.append(TestGroup((node, partner), round_no, "confirm"))
        busy.update((node, partner))
    groups.extend(_pair_among(left, ev, label, busy, round_no))
    return groups


def _pair_among(
    left: list[str], ev: Evidence, label: Mapping[str, str], busy: set[str], round_no: int
) -> list[TestGroup]:
    """Pair nodes without a good partner with each other: same label first, never a pair already run."""
    purpose: Purpose = "screen"  # no known-good partner: both nodes are under test
    groups: list[TestGroup] = []
    by_label: dict[str, list[str]] = defaultdict(list)
    for node in left:
        by_label[label.get(node, "")].append(node)
    leftovers: list[str] = []
    for members in by_label.values():
        leftovers.extend(_greedy(members, ev, busy, groups, round_no, purpose))
    _greedy(leftovers, ev, busy, groups, round_no, purpose)
    return groups


def _greedy(
    members: list[str], ev: Evidence, busy: set[str], groups: list[TestGroup], round_no: int, purpose: Purpose
) -> list[str]:
    unpaired: list[str] = []
    free = [m for m in members if m not in busy]
    for i, node in enumerate(free):
        if node in busy:
            continue
        for j in range(i + 1, len(free)):
            other = free[j]
            if other not in busy and other not in ev.tried[node]:
                groups.append(TestGroup((node, other), round_no, purpose))
                busy.update((node, other))
                break
        else:
            unpaired.append(node)
    return unpaired


def stalemate_retests(
    ev: Evidence,
    records: Sequence[tuple[TestGroup, float | None]],
    rules: IsolationRules,
    round_no: int,
) -> list[TestGroup]:
    """When no partner is left: run again (`retries` times) each group that failed under the
    reference between nodes that never passed anywhere, before they are left undetermined.

    Without a third, known-good node one failing pair cannot say which node is at fault, and a
    single figure cannot tell a fault from a passing disturbance (cross traffic, a busy host).
    A fault fails again; a pass makes both nodes good, and the first failure is then retested as
    a link candidate (evidence.py) until it recurs or proves a one-off. Hung groups (no figure)
    are not run again: each try costs the job's whole deadline.
    """
    tries: dict[frozenset[str], list[float | None]] = defaultdict(list)
    groups: dict[frozenset[str], TestGroup] = {}
    for group, figure in records:
        tries[group.key].append(figure)
        groups.setdefault(group.key, group)
    busy: set[str] = set()
    out: list[TestGroup] = []
    for key, figures in tries.items():
        ref = ev.references.get(groups[key].size)
        if ref is None or len(figures) >= 1 + rules.retries or key & busy:
            continue
        if key & ev.good or any(n in ev.verdicts for n in key):
            continue
        if all(judge_figure(f, ref, rules) == "fail" for f in figures):  # a hung try is "none"
            out.append(TestGroup(groups[key].nodes, round_no, "retest"))
            busy |= key
    return out
