"""Judge every recorded group and say what is known about each node (pure; used by planner.py).

The fault model (NVIDIA/nccl issue 325; REFERENCE.md): a node fault slows every group it is in; a
link fault slows only groups holding both of its nodes. So one group that passes cleanly (within the
warn band) proves each of its nodes free of node faults ("good"); a figure between the warn and the
fail gap ("warn") proves nothing either way. A node that never passes cleanly is a node fault once
it has been judged with two different good partners, under the reference with every one of them and
failing with at least one (dead when it never gave a figure at all): a node slower with everyone is
the node, never a link. A group that fails although every member is good is a link candidate: it
runs again (`retries`) and a fault that repeats is a link fault. One that passes on retry is run
`flaky_retests` times more: a failure that recurs is a flaky link and fails both nodes; one that
never recurs was a one-off (said in the nodes' reasons). Everything is recomputed from all records
each time, so a reference that appears later (a median needs `min_fleet_figures`) judges earlier
groups too.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence

from clusterforge.certify.network.model import (
    Evidence,
    IsolationRules,
    LinkVerdict,
    NodeKind,
    NodeVerdict,
    Outcome,
    Reference,
    Result,
    TestGroup,
)
from clusterforge.certify.network.reasons import (
    fault_reason,
    flaky_reason,
    link_reason,
    one_line,
    pass_reason,
)

_FAILED = ("fail", "none")


def references(
    records: Sequence[tuple[TestGroup, float | None]], rules: IsolationRules
) -> dict[int, Reference]:
    figures: dict[int, list[float]] = defaultdict(list)
    for group, figure in records:
        if figure is not None:
            figures[group.size].append(figure)
    refs = {size: Reference(size, float(value), "baseline") for size, value in rules.baseline.items()}
    for size, values in figures.items():
        if size not in refs and len(values) >= rules.min_fleet_figures:
            refs[size] = Reference(
                size, fleet_reference(values, rules.fail_gap), f"fleet median of {len(values)}"
            )
    return refs


def fleet_reference(values: Sequence[float], fail_gap: float) -> float:
    """The median, while most figures are healthy; else the median of the upper half.

    Three quarters or more of the figures healthy (within `fail_gap` of the upper-half median): the
    plain median is a healthy figure and keeps the pass band widest against noise. Otherwise (a small
    fleet, or a round, with many faults) the plain median may be a faulty figure; the upper-half
    median is still a healthy one.
    """
    upper = upper_median(values)
    healthy = sum(1 for v in values if v >= upper * (1 - fail_gap))
    return statistics.median(values) if 4 * healthy >= 3 * len(values) else upper


def upper_median(values: Sequence[float]) -> float:
    """The median of the upper half of the figures, by rank (the top ceil(n/2) of them).

    A fault only lowers a figure, so on a healthy fleet this sits within one noise standard deviation
    of the plain median, and it stays a healthy figure while well over half of the groups fail
    (a small fleet with several faults, or a round of confirmations), where the plain median does not.
    By rank, not "at or above the median": with 3 nodes and one slow, two of the three pairs are
    slow and equal the median, and "at or above" would keep them all (a slow reference).
    """
    top = sorted(values, reverse=True)[: (len(values) + 1) // 2]
    return statistics.median(top)


def subjects(group: TestGroup) -> tuple[str, ...]:
    """The nodes a group tests: all of them, except in a confirmation, whose partners are known good."""
    return group.nodes[:1] if group.purpose == "confirm" else group.nodes


def judge_figure(figure: float | None, ref: Reference | None, rules: IsolationRules) -> Outcome:
    if figure is None:
        return "none"
    if ref is None:
        return "unjudged"
    if figure < ref.value * (1 - rules.fail_gap):
        return "fail"
    return "warn" if figure < ref.value * (1 - rules.warn_at) else "pass"


def collect(
    nodes: Sequence[str],
    known_good: Iterable[str],
    records: Sequence[tuple[TestGroup, float | None]],
    rules: IsolationRules,
) -> Evidence:
    refs = references(records, rules)
    ev = Evidence(references=refs, good=set(known_good), clean=set(known_good), sound=set(known_good))
    results: dict[str, list[Result]] = {n: [] for n in nodes}
    failed: set[str] = set()
    tries: dict[frozenset[str], list[Outcome]] = defaultdict(list)
    for group, figure in records:
        outcome = judge_figure(figure, refs.get(group.size), rules)
        tries[group.key].append(outcome)
        for node in group.nodes:
            ev.tried[node].update(m for m in group.nodes if m != node)
            if node in results:
                results[node].append(Result(group, figure, outcome, group.key - {node}))
        if outcome in ("pass", "warn"):
            ev.good.update(group.nodes)
        if outcome == "pass":
            ev.sound.update(group.nodes)
        elif outcome in _FAILED:
            failed.update(subjects(group))
    ev.suspects = failed
    ev.clean = ev.good - failed
    ev.results = results
    _judge_never_passed(ev, nodes, rules)
    _judge_slow_with_everyone(ev, nodes, rules)
    _judge_passed(ev, nodes, tries, rules)
    return ev


def _judge_never_passed(ev: Evidence, nodes: Sequence[str], rules: IsolationRules) -> None:
    """A node with no pass: a node fault (or dead) after failing with two different good partners."""
    for node in nodes:
        if node in ev.good:
            continue
        judged = [r for r in ev.results[node] if r.outcome in _FAILED]
        confirmations = [r for r in judged if r.others <= ev.good]
        partners = {r.others for r in confirmations}
        if len(partners) >= 2:
            dead = all(r.figure is None for r in ev.results[node])
            ev.verdicts[node] = NodeVerdict(
                node, "dead" if dead else "node-fault", fault_reason(ev, confirmations, dead, rules)
            )
            continue
        ev.needy.append(node)
        if not ev.results[node]:
            ev.waiting[node] = "not tested"
        elif not judged:
            ev.waiting[node] = "no reference to judge its figures"
        else:
            ev.waiting[node] = f"failed with {len(partners)} known-good partner(s), needs 2"


def _judge_slow_with_everyone(ev: Evidence, nodes: Sequence[str], rules: IsolationRules) -> None:
    """A node that failed, and only warned elsewhere, under the reference with every partner it
    was tested with (at least two, each of them passing cleanly with others): the node is slow,
    not a link. (A link fault needs both of its nodes to pass cleanly with others.)"""
    for node in nodes:
        if node not in ev.good or node in ev.sound or node in ev.verdicts:
            continue
        judged = [r for r in ev.results[node] if r.outcome in (*_FAILED, "warn")]
        if not any(r.outcome in _FAILED and r.others <= ev.sound for r in judged):
            continue  # it only warned, or failed beside a node that is itself in question
        confirmations = [r for r in judged if r.others <= ev.sound]
        if len({r.others for r in confirmations}) >= 2:
            ev.verdicts[node] = NodeVerdict(node, "node-fault", fault_reason(ev, confirmations, False, rules))


def _retest_state(outcomes: list[Outcome], rules: IsolationRules) -> str:
    """What the tries of a group between good nodes say: "link" (failed every time, `retries`
    times over), "flaky" (failed again after a pass), "once" (one failure that did not recur in
    `flaky_retests` more runs), or "retest" (not decided yet)."""
    failed = sum(1 for o in outcomes if o in _FAILED)
    passed = len(outcomes) - failed
    if not passed:
        return "link" if len(outcomes) >= 1 + rules.retries else "retest"
    if failed >= 2:
        return "flaky"
    return "once" if len(outcomes) >= 1 + rules.retries + rules.flaky_retests else "retest"


def _judge_passed(
    ev: Evidence, nodes: Sequence[str], tries: dict[frozenset[str], list[Outcome]], rules: IsolationRules
) -> None:
    """A node that passed somewhere: cleared by two good partners; its other failures are explained by a
    faulty partner, or are link candidates (both nodes pass cleanly with others) retested until they
    repeat (link fault), recur after a pass (flaky link) or prove a one-off."""
    bad = {n for n, v in ev.verdicts.items() if v.kind in ("node-fault", "dead")}
    for node in nodes:
        if node not in ev.sound or node in ev.verdicts:
            continue
        failing = {
            r.others
            for r in ev.results[node]
            if r.outcome in _FAILED and not r.others & bad and r.others <= ev.sound
        }
        if len(failing) >= 2:
            # It passes with some good nodes and fails with several others: results that depend on the
            # partner and the try are the node's (two link faults at one node are its NIC's too).
            ev.verdicts[node] = NodeVerdict(node, "flaky", flaky_reason(ev, node, rules))
    bad |= {n for n, v in ev.verdicts.items() if v.kind == "flaky"}
    combos: dict[str, list[tuple[frozenset[str], str]]] = {}
    retest_set: set[frozenset[str]] = set()
    # Where any node's partners come from, built once: per node only the few it takes away are
    # counted (a set of every node built per good node was 95 % of the planner's time at 4,096).
    partners_pool = (set(nodes) | ev.good) - bad
    for node in nodes:
        if node not in ev.good or node in ev.verdicts:
            continue
        own = ev.results[node]
        # A failure decided a one-off (it did not recur on retest) counts no more against the partner.
        failed_with = {
            r.others
            for r in own
            if r.outcome == "fail"
            and _retest_state([o for o in tries[r.group.key] if o != "unjudged"], rules) != "once"
        }
        # a partner it both passed and failed with is a disagreement, not a confirmation
        passed_with = {r.others for r in own if r.outcome in ("pass", "warn")} - failed_with
        mine: list[tuple[frozenset[str], str]] = []
        pending = False
        for r in own:
            if r.outcome not in _FAILED or r.others & bad:
                continue
            if node not in ev.sound or not r.others <= ev.sound:
                pending = True  # a node in question (or its partner): more partners decide
                continue
            state = _retest_state([o for o in tries[r.group.key] if o != "unjudged"], rules)
            if state == "retest" and r.group.key not in retest_set:
                retest_set.add(r.group.key)
                ev.retests.append(r.group.key)
            if (r.group.key, state) not in mine:
                mine.append((r.group.key, state))
        # Two good partners clear a suspect, or every partner there is: in a run of 3 nodes a node
        # with a link fault to one of them has only one other to pass with.
        failed_partners = {m for key in failed_with for m in key}
        # len(partners_pool - {node} - failed_partners), from the few nodes it takes away
        available = len(partners_pool) - len(({node} | failed_partners) & partners_pool)
        needed = max(1, min(2, available))
        if node in ev.suspects and len(passed_with) < needed:
            ev.needy.append(node)
            ev.waiting[node] = f"passed with {len(passed_with)} known-good partner(s), needs {needed}"
        elif pending and node not in ev.sound:
            ev.needy.append(node)  # under the reference with every partner so far: one more decides
            ev.waiting[node] = (
                "under the reference with every partner so far; needs another known-good partner"
            )
        elif pending or any(state == "retest" for _, state in mine):
            ev.waiting[node] = "a retest or a partner's verdict"
        else:
            combos[node] = mine
    _links_and_flaky(ev, combos, rules)


def _links_and_flaky(
    ev: Evidence, combos: dict[str, list[tuple[frozenset[str], str]]], rules: IsolationRules
) -> None:
    seen: set[frozenset[str]] = set()
    for node, mine in combos.items():
        once = [key for key, state in mine if state == "once"]
        faults = [(key, state) for key, state in mine if state != "once"]
        if not faults:
            note = ""
            if once:
                # One failure that did not recur in `flaky_retests` more runs: decided a one-off.
                other = "+".join(sorted(once[0] - {node}))
                runs = len([r for r in ev.results[node] if r.group.key == once[0]])
                note = f"; one failure with {other} did not recur ({runs} runs)"
            ev.verdicts[node] = NodeVerdict(node, "pass", pass_reason(ev, node, rules, note))
            continue
        key, state = faults[0]
        kind: NodeKind = "link-fault" if state == "link" else "flaky"
        reason = link_reason(ev, key, state, rules)
        if len(faults) > 1:
            reason = f"{reason} (+{len(faults) - 1} more)"
        ev.verdicts[node] = NodeVerdict(node, kind, one_line(reason))
        for key, state in faults:
            if key not in seen:
                seen.add(key)
                pair = tuple(sorted(key))
                ev.links.append(
                    LinkVerdict(
                        (pair[0], pair[-1]),
                        "link-fault" if state == "link" else "flaky",
                        one_line(link_reason(ev, key, state, rules)),
                    )
                )
