"""Strikes: every failure recorded against the hardware it happened on, and the lemon verdict.

A strike is held by a hardware identity, not by a node name: a GPU UUID or serial when the failure
names the GPU, else the machine (EC2 instance id, container id). A node name outlives a replaced
machine; the old machine's strikes stay with it and the new machine starts clean, while a bad GPU
the provider hands back brings its strikes along. A node is a lemon when its machine or any of its
GPUs holds ``count`` strikes within ``window`` (Azure's health agent counts the same way). Linear in
strikes and nodes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from clusterforge.spec.health import Strikes


@dataclass(frozen=True)
class Strike:
    identity: str  # "i-0abc...", "GPU-8a1b...", "serial 1650..."
    node: str  # the node name it happened on (for people; identity is what counts)
    at: float  # seconds since the epoch
    reason: str
    check: str = ""  # the failing check's id, when known


def dedupe(strikes: Iterable[Strike]) -> list[Strike]:
    """One strike per (identity, time, reason): the same failure read from two journal places counts once."""
    seen: set[tuple[str, float, str]] = set()
    out: list[Strike] = []
    for s in strikes:
        key = (s.identity, s.at, s.reason)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out


def in_window(strikes: Iterable[Strike], policy: Strikes, now: float) -> dict[str, list[Strike]]:
    """Strikes within the policy's window before ``now``, by identity, oldest first."""
    start = now - policy.window_s
    by_identity: dict[str, list[Strike]] = defaultdict(list)
    for s in strikes:
        if start <= s.at <= now:
            by_identity[s.identity].append(s)
    for items in by_identity.values():
        items.sort(key=lambda s: s.at)
    return dict(by_identity)


@dataclass(frozen=True)
class LemonVerdict:
    node: str
    lemon: bool
    strikes: int  # the most any one of its identities holds in the window
    identity: str  # that identity ("" when none holds a strike)
    last: Strike | None  # the newest strike on any of its identities


def lemon_verdicts(
    identities: Mapping[str, Sequence[str]], strikes: Iterable[Strike], policy: Strikes, now: float
) -> dict[str, LemonVerdict]:
    """Per node (``identities``: node -> its machine id and GPU ids now), whether it is a lemon."""
    window = in_window(strikes, policy, now)
    out: dict[str, LemonVerdict] = {}
    for node, ids in identities.items():
        worst, worst_id, last = 0, "", None
        for identity in ids:
            held = window.get(identity, [])
            if len(held) > worst:
                worst, worst_id = len(held), identity
            if held and (last is None or held[-1].at > last.at):
                last = held[-1]
        out[node] = LemonVerdict(node, worst >= policy.count, worst, worst_id, last)
    return out


def mean_time_between(strikes: Sequence[Strike]) -> float | None:
    """Mean seconds between successive incidents of one node (None below two)."""
    times = sorted(s.at for s in strikes)
    if len(times) < 2:
        return None
    return (times[-1] - times[0]) / (len(times) - 1)
