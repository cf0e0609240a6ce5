"""One-line verdict reasons with their evidence (isolate_evidence.py builds them).

Each fits a Slurm drain reason after "clusterforge: " (Slurm keeps 200 characters here): the check,
the figures, the partners they were measured with, and the reference with where it came from.
"""

from __future__ import annotations

from collections.abc import Iterable

from clusterforge.certify.network.model import Evidence, IsolationRules, Result

REASON_MAX = 186  # Slurm drain reasons stay within 200 characters with the "clusterforge: " prefix


def fig(figure: float | None, unit: str) -> str:
    return "no result" if figure is None else f"{figure:.3g} {unit}"


def with_partners(results: Iterable[Result], unit: str) -> str:
    parts = [f"{fig(r.figure, unit)} with {'+'.join(sorted(r.others))}" for r in results]
    return " and ".join(parts) if len(parts) <= 2 else ", ".join(parts[:-1]) + " and " + parts[-1]


def one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 3] + "..."


def fault_reason(ev: Evidence, confirmations: list[Result], dead: bool, rules: IsolationRules) -> str:
    first = distinct(confirmations)
    if dead:
        partners = " or ".join("+".join(sorted(r.others)) for r in first)
        return one_line(
            f"{rules.check}: no result with {partners} (did not take part, or every job with it died)"
        )
    size = first[0].group.size
    return one_line(
        f"{rules.check}: node fault, under the reference with every partner: {with_partners(first, rules.unit)}; "
        f"reference {ev.reference_text(size, rules.unit)}"
    )


def pass_reason(ev: Evidence, node: str, rules: IsolationRules, note: str = "") -> str:
    own = ev.results.get(node, [])
    passes = distinct([r for r in own if r.outcome == "pass"])[:2]
    if not passes:  # it only warned: passes, and says so
        warned = distinct([r for r in own if r.outcome == "warn"])[:2]
        if not warned:
            return one_line(f"{rules.check}: known good{note}")
        size = warned[0].group.size
        return one_line(
            f"{rules.check}: {with_partners(warned, rules.unit)}, more than {rules.warn_at:.0%} under the "
            f"reference {ev.reference_text(size, rules.unit)} with every partner but within the fail gap{note}"
        )
    size = passes[0].group.size
    reference = ev.reference_text(size, rules.unit)
    return one_line(f"{rules.check}: {with_partners(passes, rules.unit)}, reference {reference}{note}")


def flaky_reason(ev: Evidence, node: str, rules: IsolationRules) -> str:
    own = ev.results[node]
    fails = distinct([r for r in own if r.outcome in ("fail", "none")])[:2]
    passes = distinct([r for r in own if r.outcome == "pass"])[:2]
    size = own[0].group.size
    return one_line(
        f"{rules.check}: flaky, results disagree on retry: {with_partners(fails, rules.unit)}; "
        f"but {with_partners(passes, rules.unit)}, reference {ev.reference_text(size, rules.unit)}"
    )


def link_reason(ev: Evidence, key: frozenset[str], state: str, rules: IsolationRules) -> str:
    """Both ends pass cleanly (within the warn band) with others, and fail together: the link."""
    a, b = sorted(key)[0], sorted(key)[-1]
    together = [r for r in ev.results.get(a, []) if r.group.key == key]
    figures = [r.figure for r in together]
    if state == "link":
        shown = ", ".join("no result" if f is None else f"{f:.3g}" for f in figures[:3])
        what = f"link fault {a}<->{b} at {shown} {rules.unit}"
    else:
        failed = sum(1 for r in together if r.outcome in ("fail", "none"))
        worst = min((f for f in figures if f is not None), default=None)
        what = f"flaky link {a}<->{b}, failed in {failed} of {len(together)} runs ({fig(worst, rules.unit)} at worst)"
    elsewhere = []
    for node in (a, b):
        passes = distinct([r for r in ev.results.get(node, []) if r.outcome == "pass"])
        if passes:
            elsewhere.append(f"{node}+{'+'.join(sorted(passes[0].others))}")
    return (
        f"{rules.check}: {what}, reference {ev.reference_text(len(key), rules.unit)}; "
        f"each passes within {rules.warn_at:.0%} of it with others: {', '.join(elsewhere)}"
    )


def distinct(results: Iterable[Result]) -> list[Result]:
    seen: set[frozenset[str]] = set()
    out = []
    for r in results:
        if r.others not in seen:
            seen.add(r.others)
            out.append(r)
    return out
