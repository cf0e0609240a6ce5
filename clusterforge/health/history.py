"""Per node, its incident history in one short line for `invoke status` (pure: journal data in).

``"2/3 in 7d, last 5 h ago, MTBI 1.2 d"``: the most strikes any of its identities holds in the
policy's window against the count that makes a lemon, the newest incident, and the mean time
between its incidents; ``"LEMON 3/3 in 7d, ..."`` once it is one. Nodes without any strike: no entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterforge.health.state import read_inputs
from clusterforge.health.strikes import Strike, lemon_verdicts, mean_time_between
from clusterforge.journal import NodeRecord
from clusterforge.spec.models import ClusterSpec


def _span(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.1f} d"


def node_history(
    spec: ClusterSpec, records: Mapping[str, NodeRecord], sections: Mapping[str, Any], now: float
) -> dict[str, str]:
    """node -> its history line, lemons first, then by strikes held, then by name (the order people read
    them in: the HTML report lists them so); N log N in nodes with incidents, linear in strikes."""
    inputs = read_inputs(spec, records, sections)
    policy = spec.health.strikes
    verdicts = lemon_verdicts(inputs.identities, inputs.strikes, policy, now)
    by_node: dict[str, list[Strike]] = {}
    for s in inputs.strikes:
        by_node.setdefault(s.node, []).append(s)
    ranked: list[tuple[bool, int, str, str]] = []
    for node, mine in by_node.items():
        verdict = verdicts.get(node)
        if verdict is None:
            continue  # a node the spec no longer has
        last = max(s.at for s in mine)
        parts = [
            f"{'LEMON ' if verdict.lemon else ''}{verdict.strikes}/{policy.count} in {policy.window}",
            f"last {_span(max(0.0, now - last))} ago",
        ]
        mtbi = mean_time_between(mine)
        if mtbi is not None:
            parts.append(f"MTBI {_span(mtbi)}")
        ranked.append((not verdict.lemon, -verdict.strikes, node, ", ".join(parts)))
    return {node: line for _, _, node, line in sorted(ranked)}
