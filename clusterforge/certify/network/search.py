"""Choose a round for a small fleet by looking one round ahead over the fault hypotheses (pure).

When good partners are scarce (a few nodes, many of them suspects) the order in which the greedy
pairing (isolate_schedule.py) hands them out decides whether the run takes 4 rounds or 7. Here,
while few nodes are unresolved, every hypothesis that explains the results so far is listed (which
never-passed nodes have node faults; a failed pair with none of them is then a link fault), each
weighted by parsimony (`P_NODE` per faulty node, `P_LINK` per link fault), and every matching of
the nodes that still need a test is scored by what it would leave to do under each hypothesis:

- a node fault needs failures with 2 different healthy partners;
- a healthy suspect needs passes with 2 different partners (1 if it never failed), and each link
  fault at it one more run of that pair per retry;
- the remaining rounds are at least the largest such need at one node, and at least the test slots
  still needed over the healthy nodes (each takes one group a round).

The matching with the lowest expected remaining rounds (then fewest remaining slots) is the round.
It is a planning aid only: the verdicts are judged from the measured figures (isolate_evidence.py)
whatever the hypotheses said.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from clusterforge.certify.network.evidence import Evidence, subjects
from clusterforge.certify.network.model import IsolationRules, TestGroup

P_NODE = 0.2  # prior weight of one more faulty node
P_LINK = 0.2  # prior weight of one more link fault
MAX_UNKNOWN = 12  # never-passed nodes enumerated (2^12 fault sets)
MAX_HYPOTHESES = 64  # the most probable ones are scored
MAX_ACTIVE = 12  # nodes that still need a test, at most, for the search to run
MAX_MATCHINGS = 6000  # candidate rounds scored, at most; more: the greedy pairing is used

Pair = frozenset[str]


@dataclass(frozen=True)
class Hypothesis:
    faulty: frozenset[str]
    links: frozenset[Pair]
    weight: float


@dataclass(frozen=True)
class _Tried:
    """One recorded group, reduced to what the hypotheses need."""

    key: Pair
    failed: bool  # failed or gave no result (and never passed on another try)
    subjects: frozenset[str]


def _history(ev: Evidence) -> list[_Tried]:
    seen: dict[TestGroup, tuple[TestGroup, str]] = {}
    for results in ev.results.values():
        for r in results:
            seen[r.group] = (r.group, r.outcome)
    passed_keys = {g.key for g, o in seen.values() if o == "pass"}
    out = []
    for group, outcome in seen.values():
        if outcome == "unjudged":
            continue
        failed = outcome in ("fail", "none") and group.key not in passed_keys
        out.append(_Tried(group.key, failed, frozenset(subjects(group))))
    return out


def hypotheses(ev: Evidence, nodes: Sequence[str]) -> list[Hypothesis] | None:
    """Fault sets among the never-passed nodes that explain every failure; None when too many."""
    unknown = [n for n in nodes if n not in ev.good and n not in ev.verdicts]
    if len(unknown) > MAX_UNKNOWN:
        return None
    history = _history(ev)
    fixed_faulty = frozenset(n for n, v in ev.verdicts.items() if v.kind in ("node-fault", "dead"))
    failures = [t.key for t in history if t.failed]
    out: list[Hypothesis] = []
    for mask in range(1 << len(unknown)):
        faulty = fixed_faulty | {n for i, n in enumerate(unknown) if mask >> i & 1}
        links = set()
        for key in failures:
            if key & faulty:
                continue
            if len(key) != 2:
                break  # a larger group failing without a faulty node: not this model
            links.add(key)
        else:
            extra = len(faulty) - len(fixed_faulty)
            out.append(Hypothesis(frozenset(faulty), frozenset(links), P_NODE**extra * P_LINK ** len(links)))
    out.sort(key=lambda h: -h.weight)
    return out[:MAX_HYPOTHESES]


class _Needs:
    """What is left to test under one hypothesis, after the history (and a candidate round)."""

    def __init__(
        self, h: Hypothesis, nodes: Sequence[str], known_good: Collection[str], rules: IsolationRules
    ):
        self.h = h
        self.rules = rules
        self.nodes = list(nodes)
        self.healthy = [n for n in nodes if n not in h.faulty]
        self.known_good = set(known_good)
        self.capacity = len(self.healthy) + len(self.known_good)
        self.fail_partners: dict[str, set[str]] = {n: set() for n in h.faulty if n in set(nodes)}
        self.passes: dict[str, set[str]] = {n: set() for n in self.healthy}
        self.suspect: set[str] = set()
        self.link_tries: dict[Pair, int] = dict.fromkeys(h.links, 0)

    def add(self, key: Pair, subjects_: Collection[str]) -> None:
        fails = bool(key & self.h.faulty) or key in self.h.links
        if key in self.link_tries:
            self.link_tries[key] += 1
        for node in key:
            others = key - {node}
            if node in self.fail_partners:
                self.fail_partners[node].update(o for o in others if o not in self.h.faulty)
            elif node in self.passes:
                if fails:
                    if node in subjects_:
                        self.suspect.add(node)
                else:
                    self.passes[node].update(others)

    def rem(self, node: str, extra: Sequence[tuple[Pair, Collection[str]]] = ()) -> int:
        """Tests `node` still needs, after the history and the `extra` groups it is in."""
        if node in self.fail_partners:
            partners = set(self.fail_partners[node])
            for key, _ in extra:
                partners.update(o for o in key - {node} if o not in self.h.faulty)
            return max(0, min(2, self.capacity) - len(partners))
        if node not in self.passes:
            return 0  # lent as known good
        suspect = node in self.suspect
        passes = set(self.passes[node])
        tries = dict(self.link_tries)
        for key, subjects_ in extra:
            if key in tries:
                tries[key] += 1
            if key & self.h.faulty or key in self.h.links:
                suspect = suspect or node in subjects_
            else:
                passes.update(key - {node})
        links = [k for k in self.h.links if node in k]
        linked = {m for k in links for m in k}
        needed = min(2 if suspect else 1, max(self.capacity - 1 - len(links), 1))
        retry_runs = 1 + self.rules.retries
        return max(0, needed - len(passes - linked)) + sum(max(0, retry_runs - tries[k]) for k in links)

    def prepare(self) -> None:
        self.base = {n: self.rem(n) for n in [*self.fail_partners, *self.healthy]}
        self.base_total = sum(self.base.values())
        self.by_rem = sorted(self.base, key=lambda n: -self.base[n])


def search_round(
    ev: Evidence,
    nodes: Sequence[str],
    known_good: Sequence[str],
    rules: IsolationRules,
    needy: Sequence[str],
    partners: Sequence[str],
    busy: Collection[str],
    allowed: Callable[[str, str], bool],
    label: Mapping[str, str],
) -> list[tuple[str, str]] | None:
    """The best pairs for this round among `needy` (and `partners`, good nodes free to serve), or
    None when the fleet is too large to search (the caller pairs greedily)."""
    needy = [n for n in needy if n not in busy]
    partners = [p for p in partners if p not in busy and p not in needy]
    if not needy or len(needy) > MAX_ACTIVE or len(needy) + len(partners) > 2 * MAX_ACTIVE:
        return None
    hyps = hypotheses(ev, nodes)
    if not hyps:
        return None
    history = _history(ev)
    bases = []
    for h in hyps:
        needs = _Needs(h, nodes, known_good, rules)
        for t in history:
            needs.add(t.key, t.subjects)
        needs.prepare()
        bases.append(needs)
    matchings = _matchings(needy, partners, allowed, label)
    if matchings is None:
        return None
    weights = [h.weight / sum(x.weight for x in hyps) for h in hyps]
    good = set(ev.good)
    tables = [_Table(needs, _pairs_of(matchings), good) for needs in bases]
    scored = []
    for index, pairs in enumerate(matchings):
        rounds = slots = 0.0
        touched = {n for pair in pairs for n in pair}
        for w, table in zip(weights, tables, strict=True):
            r, s = table.after(pairs, touched)
            rounds += w * r
            slots += w * s
        crossing = sum(1 for a, b in pairs if label.get(a, "") != label.get(b, ""))
        scored.append(((round(rounds, 9), round(slots, 9), crossing, index), pairs))
    return min(scored, key=lambda item: item[0])[1]


def _pairs_of(matchings: Sequence[Sequence[tuple[str, str]]]) -> set[tuple[str, str]]:
    return {pair for pairs in matchings for pair in pairs}


def _subjects(a: str, b: str, good: Collection[str]) -> frozenset[str]:
    """Who a pair tests, as scored: only `a` when its partner is already good (a confirmation)."""
    return frozenset((a,)) if b in good else frozenset((a, b))


class _Table:
    """One hypothesis' needs after one more pair at each node: a round's score is a sum of lookups
    (each node is in one pair a round, so its need after the round depends on that pair only)."""

    def __init__(self, needs: _Needs, pairs: Collection[tuple[str, str]], good: Collection[str]) -> None:
        base = needs.base
        self.total = needs.base_total
        self.capacity = max(1, needs.capacity)
        self.by_rem = [(n, base[n]) for n in needs.by_rem if base[n]]
        # pair -> (change in slots left, the larger need left at its two nodes)
        self.delta: dict[tuple[str, str], tuple[int, int]] = {}
        for a, b in pairs:
            test = [(frozenset((a, b)), _subjects(a, b, good))]
            ra = needs.rem(a, test) if a in base else 0
            rb = needs.rem(b, test) if b in base else 0
            self.delta[(a, b)] = (ra - base.get(a, 0) + rb - base.get(b, 0), max(ra, rb))

    def after(self, pairs: Sequence[tuple[str, str]], touched: Collection[str]) -> tuple[int, int]:
        """(rounds at least, test slots at least) still needed once `pairs` (over the nodes
        `touched`) have run: the larger of the largest need at one node and the slots over the
        healthy nodes."""
        total = self.total
        top = 0
        for pair in pairs:
            change, most = self.delta[pair]
            total += change
            if most > top:
                top = most
        for node, need in self.by_rem:
            if node not in touched:
                top = max(top, need)
                break
        if not total:
            return 0, 0
        return max(top, -(-total // self.capacity)), total


def _matchings(
    needy: Sequence[str],
    partners: Sequence[str],
    allowed: Callable[[str, str], bool],
    label: Mapping[str, str],
) -> list[list[tuple[str, str]]] | None:
    """Every set of disjoint pairs that gives each needy node a partner where one is left (needy
    nodes may pair with each other); None when there are more than MAX_MATCHINGS."""
    out: list[list[tuple[str, str]]] = []
    pool = list(needy) + list(partners)

    def walk(i: int, used: frozenset[str], pairs: list[tuple[str, str]]) -> bool:
        while i < len(needy) and needy[i] in used:
            i += 1
        if i == len(needy):
            out.append(list(pairs))
            return len(out) <= MAX_MATCHINGS
        node = needy[i]
        options = [p for p in pool if p != node and p not in used and allowed(node, p)]
        # Interchangeable partners (idle good nodes of one label, met by nobody needy) are tried once.
        seen_classes: set[tuple[str, ...]] = set()
        tried_any = False
        for p in options:
            if p in partners:
                cls = (label.get(p, ""),) + tuple(sorted(n for n in needy if not allowed(n, p)))
                if cls in seen_classes:
                    continue
                seen_classes.add(cls)
            tried_any = True
            if not walk(i + 1, used | {node, p}, [*pairs, (node, p)]):
                return False
        if not tried_any or len(options) < 2:
            return walk(i + 1, used | {node}, pairs)  # sits this round out
        return True

    if not walk(0, frozenset(), []):
        return None
    return out
