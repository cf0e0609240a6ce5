"""`invoke drift`: the configure stage's decision for every node of a stack, asked, not acted on."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterforge.drift.nodes import decisions, nodes_now
from clusterforge.journal import Journal
from clusterforge.node.remote import Runner, node_runner
from clusterforge.pipeline.context import INVENTORIES, PLAYBOOKS
from clusterforge.providers.base import Provider
from clusterforge.spec.models import ClusterSpec


def drift_report(
    spec: ClusterSpec,
    provider: Provider,
    runner: Callable[..., Runner] = node_runner,
    inventories: Path = INVENTORIES,
    playbooks: Path = PLAYBOOKS,
) -> list[dict[str, Any]]:
    """One row per node of the spec: would the next `up` converge it, why, what differs."""
    journal = Journal(spec.stack)
    existing = {n.name: n for n in provider.nodes(spec)}
    running = {name: n for name, n in existing.items() if n.state == "running"}
    now = nodes_now(spec, running.values(), inventories / spec.stack, playbooks)
    decided = decisions(journal, running, now, runner)
    rows = []
    for pool in spec.node_pools:
        for name in spec.node_names(pool):
            if name in decided:
                rows.append({"node": name, **decided[name].as_dict()})
            else:
                state = existing[name].state if name in existing else "absent"
                rows.append(
                    {
                        "node": name,
                        "converge": True,
                        "why": f"node is {state}: `up` brings it up",
                        "changes": [],
                    }
                )
    return rows
