"""Drift of a stack's nodes: their inputs now, their digests now, the decision; baselines after a converge.

Used by the configure stage of `up` (skip unchanged nodes) and by `invoke drift` (report only).
Inputs reuse ``clusterforge.plan.inputs`` (the per-role fingerprints `invoke plan` compares);
what a node's roles manage comes from their ``meta/manages.yml`` (manages.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clusterforge.drift.decide import Baseline, Decision, decide
from clusterforge.drift.digest import Gathered, gather_all
from clusterforge.drift.manages import Managed, ManagesError, managed_for
from clusterforge.journal import Journal, now_iso
from clusterforge.node.remote import Runner
from clusterforge.plan.inputs import digest, read_plays, roles_for, stack_inputs, tree_hash
from clusterforge.providers.base import Node
from clusterforge.spec.loader import REPO_ROOT
from clusterforge.spec.models import ClusterSpec


@dataclass(frozen=True)
class NodeNow:
    """One node's inputs and managed items as this tree and inventory give them."""

    inputs: dict[str, str]
    managed: Managed | None
    error: str = ""  # why they could not be computed (the node then converges)


def inventory_variables(folder: Path) -> dict[str, dict[str, Any]]:
    """Host -> the variables the rendered inventory gives it (group_vars/all under host vars)."""
    shared: dict[str, Any] = {}
    for path in sorted((folder / "group_vars" / "all").glob("*.yml")):
        shared.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    hosts = yaml.safe_load((folder / "hosts.yml").read_text(encoding="utf-8")) or {}
    out: dict[str, dict[str, Any]] = {}
    for group in (hosts.get("all", {}).get("children") or {}).values():
        for name, hv in ((group or {}).get("hosts") or {}).items():
            out.setdefault(name, dict(shared)).update(hv or {})
    return out


def nodes_now(
    spec: ClusterSpec,
    nodes: Iterable[Node],
    inventory: Path,
    playbooks: Path,
    root: Path = REPO_ROOT,
) -> dict[str, NodeNow]:
    """Every node's input fingerprints and managed items; one failure is that node's error."""
    nodes = list(nodes)
    try:
        fleet = stack_inputs(spec, root, "working tree")
        plays = read_plays(root)
        variables = inventory_variables(inventory)
        shared = {
            "playbooks": tree_hash(playbooks.parent, (playbooks.name,)),
            "inventory": tree_hash(inventory.parent, (inventory.name,)),
        }
    except (OSError, ValueError, yaml.YAMLError) as exc:
        why = f"inputs not computed: {type(exc).__name__}: {exc}"
        return {n.name: NodeNow({}, None, why) for n in nodes}
    out: dict[str, NodeNow] = {}
    for node in nodes:
        mine = fleet.nodes.get(node.name)
        if mine is None:
            out[node.name] = NodeNow({}, None, f"{node.name} is not a node of the spec")
            continue
        parts = {f"role {r}": digest(list(ri.key())) for r, ri in mine.roles.items()}
        parts.update(shared, pinned=digest(mine.pinned))
        try:
            managed = managed_for(
                roles_for(plays, node), variables.get(node.name, {}), spec.software.os_image
            )
        except ManagesError as exc:
            out[node.name] = NodeNow(parts, None, str(exc))
            continue
        parts["managed"] = digest(managed.item_names())
        out[node.name] = NodeNow(parts, managed)
    return out


def decisions(
    journal: Journal,
    nodes: Mapping[str, Node],
    now: Mapping[str, NodeNow],
    runner: Callable[..., Runner],
    force: bool = False,
) -> dict[str, Decision]:
    """Converge or skip each node; digests are gathered only where the rest already matches."""
    baselines = {n: Baseline.from_dict(journal.record(n).drift) for n in nodes}
    configured = {n: journal.is_done(n, "configured") for n in nodes}
    # Gather only where a skip is still possible: a digest cannot save a node already converging.
    worth = {
        n: now[n].managed
        for n in nodes
        if not force and now[n].managed is not None and configured[n] and baselines[n] is not None
        and baselines[n].inputs == now[n].inputs  # type: ignore[union-attr]  # not None: tested just before
    }  # fmt: skip
    gathered = gather_all({n: nodes[n] for n in worth}, worth, runner)  # type: ignore[arg-type]  # no None: filtered
    out: dict[str, Decision] = {}
    for name in nodes:
        if now[name].error and not force:
            out[name] = Decision(True, f"what its roles manage is not known ({now[name].error}): converging")
            continue
        out[name] = decide(baselines[name], configured[name], now[name].inputs, gathered.get(name), force)
    return out


def record_baselines(
    journal: Journal,
    nodes: Mapping[str, Node],
    now: Mapping[str, NodeNow],
    runner: Callable[..., Runner],
) -> dict[str, str]:
    """After a converge: gather each node's digest and keep it as its baseline.

    Returns node -> why no baseline was kept; such a node converges again next time (a digest
    that cannot be read is never a clean one)."""
    at = now_iso()
    keep = {n: now[n].managed for n in nodes if n in now and now[n].managed is not None}
    gathered: dict[str, Gathered] = gather_all({n: nodes[n] for n in keep}, keep, runner)  # type: ignore[arg-type]  # no None: filtered
    missing: dict[str, str] = {}
    for name in nodes:
        got = gathered.get(name)
        if got is None or not got.ok:
            journal.record_drift(name, {})
            missing[name] = now[name].error if name in now and now[name].error else (got.error if got else "")
            continue
        journal.record_drift(name, Baseline(at, now[name].inputs, got.items).to_dict())
    return missing
