"""A run against the last comparable one, and the spec's gates (pure).

Comparable: the same stack, node type and workload sizes (``result["comparable"]``, a digest of
them), newest first. Compared figures (higher is better): training tokens/s per node count,
inference tokens/s per batch size, the loader's best samples/s. A figure more than
``regression_pct`` under the earlier one is a regression, named with both figures, both runs and
the software the nodes changed in between (so a run after an upgrade says what moved). Gates
(``benchmark:`` in the spec): ``min_scaling_efficiency`` (every training run above one node),
``min_mfu`` (GPU runs), ``fail_on_regression``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Figure:
    key: str  # e.g. "train 4 nodes tokens/s"
    value: float


@dataclass(frozen=True)
class Regression:
    key: str
    value: float
    before: float
    drop_pct: float
    line: str


@dataclass(frozen=True)
class Gate:
    name: str
    passed: bool
    line: str


def figures(result: Mapping[str, Any]) -> dict[str, Figure]:
    """The compared figures of a stored result (tolerant: an older or damaged file gives fewer)."""
    out: dict[str, Figure] = {}
    for point in (result.get("train") or {}).get("points") or []:
        if isinstance(point, dict) and isinstance(point.get("tokens_per_s"), int | float):
            key = f"train {point.get('nodes')} node(s) tokens/s"
            out[key] = Figure(key, float(point["tokens_per_s"]))
    for point in (result.get("infer") or {}).get("points") or []:
        if isinstance(point, dict) and isinstance(point.get("tokens_per_s"), int | float):
            key = f"infer batch {point.get('batch')} tokens/s"
            out[key] = Figure(key, float(point["tokens_per_s"]))
    data = result.get("data") or {}
    rows = [
        r
        for r in data.get("rows") or []
        if isinstance(r, dict) and isinstance(r.get("samples_per_s"), int | float)
    ]
    if rows:
        out["data best samples/s"] = Figure(
            "data best samples/s", max(float(r["samples_per_s"]) for r in rows)
        )
    return out


def software_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """``component old -> new`` for every software value the nodes' common set changed."""
    old, new = before.get("software_set") or {}, after.get("software_set") or {}
    return [
        f"{k} {old.get(k, '?')} -> {new.get(k, '?')}"
        for k in sorted(set(old) | set(new))
        if old.get(k) != new.get(k)
    ]


def regressions(
    current: Mapping[str, Any], previous: Mapping[str, Any] | None, pct: float
) -> list[Regression]:
    if previous is None:
        return []
    now, then = figures(current), figures(previous)
    changes = software_changes(previous, current)
    moved = f"; software changed: {', '.join(changes)}" if changes else "; same software"
    found = []
    for key, fig in sorted(now.items()):
        old = then.get(key)
        if old is None or old.value <= 0:
            continue
        drop = 100 * (1 - fig.value / old.value)
        if drop > pct:
            line = (
                f"{key}: {fig.value:,.4g}, {drop:.0f} % under {old.value:,.4g} in run {previous.get('run_id', '?')} "
                f"(threshold {pct:g} %){moved}"
            )
            found.append(Regression(key, fig.value, old.value, drop, line))
    return found


def gates(settings: Any, train_points: list[dict[str, Any]], found: list[Regression]) -> list[Gate]:
    """Each gate the spec sets, passed or not, with its figures."""
    out = []
    if settings.min_scaling_efficiency is not None:
        floor = settings.min_scaling_efficiency
        measured = [p for p in train_points if p.get("nodes", 1) > 1 and p.get("efficiency") is not None]
        low = [p for p in measured if p["efficiency"] < floor]
        if not measured:
            out.append(
                Gate(
                    "min_scaling_efficiency",
                    False,
                    f"min_scaling_efficiency {floor:g}: no training run above one node to judge",
                )
            )
        else:
            shown = ", ".join(f"{p['nodes']} nodes {p['efficiency']:.2f}" for p in measured)
            verdict = "under" if low else "at or above"
            out.append(
                Gate(
                    "min_scaling_efficiency",
                    not low,
                    f"min_scaling_efficiency {floor:g}: {shown} ({verdict})",
                )
            )
    if settings.min_mfu is not None:
        floor = settings.min_mfu
        measured = [p for p in train_points if p.get("mfu") is not None]
        low = [p for p in measured if p["mfu"] < floor]
        if not measured:
            out.append(Gate("min_mfu", False, f"min_mfu {floor:g}: no MFU measured (GPU nodes only)"))
        else:
            shown = ", ".join(f"{p['nodes']} nodes {p['mfu']:.3f}" for p in measured)
            out.append(Gate("min_mfu", not low, f"min_mfu {floor:g}: {shown}"))
    if settings.fail_on_regression:
        line = "; ".join(r.line for r in found) if found else "no regression against the last comparable run"
        out.append(Gate("fail_on_regression", not found, line))
    return out
