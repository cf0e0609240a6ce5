"""Read a group test's figures from its rank-0 report, and summarise groups by size (pure).

The network runner and the people's report both read ``network-groups.json`` entries and group
reports through these, so the HTML report needs nothing of the runner.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from clusterforge.certify.network.model import TestGroup


def rank0(group: TestGroup) -> str:
    """The node whose report carries the group's figure (gloo: the lowest name is rank 0)."""
    return sorted(group.nodes)[0]


def _check_entry(report: Mapping[str, Any] | None, check: str) -> Mapping[str, Any] | None:
    if not isinstance(report, Mapping):
        return None
    for c in report.get("checks") or []:
        if isinstance(c, Mapping) and c.get("id") == check:
            return c
    return None


def _figure(
    entry: Mapping[str, Any], collective: str | None = None
) -> tuple[str, float | None, float | None]:
    """(metric name, busbw, message bytes) of a check entry: gloo's ``busbw``; the nccl checks name
    each run ``<label>.busbw`` (label ``<collective>.<N>node``), and the largest message's is taken,
    among ``collective``'s runs when one is named."""
    metrics = entry.get("metrics")
    metrics = metrics if isinstance(metrics, Mapping) else {}
    busbw = _value(metrics.get("busbw"))
    if busbw is not None:
        return "busbw", busbw, _value(metrics.get("message_bytes"))
    sized = [
        (_value(metrics.get(k.removesuffix(".busbw") + ".message_bytes")) or 0.0, _value(v), str(k))
        for k, v in metrics.items()
        if str(k).endswith(".busbw") and (collective is None or str(k).startswith(f"{collective}."))
    ]
    sized = [(b, v, k) for b, v, k in sized if v is not None]
    if not sized:
        return "", None, None
    nbytes, value, name = max(sized)
    return name, value, nbytes or None


def group_figure(
    report: Mapping[str, Any] | None, check: str, collective: str | None = None
) -> tuple[float | None, float | None]:
    """(busbw, message bytes) of ``check`` in a report (of ``collective``'s run when named);
    (None, None) when it has no figure."""
    entry = _check_entry(report, check)
    if entry is None:
        return None, None
    _, busbw, nbytes = _figure(entry, collective)
    return busbw, nbytes


def collective_figures(
    report: Mapping[str, Any] | None, check: str, collectives: Sequence[str]
) -> dict[str, float | None]:
    """{collective: busbw} of a nccl-multi-node report, None for a collective without a figure."""
    entry = _check_entry(report, check)
    return {c: _figure(entry, c)[1] if entry is not None else None for c in collectives}


def group_curve(
    report: Mapping[str, Any] | None, check: str, collective: str | None = None
) -> list[list[float]]:
    """busbw against message size, ``[[bytes, busbw], ...]`` ascending, of ``check`` in a report:
    the check's ``series`` of the figure's metric (gloo ``busbw``, nccl ``<label>.busbw``: one
    point per size the run measured); without one, the figure at its message size; [] when none."""
    entry = _check_entry(report, check)
    if entry is None:
        return []
    name, busbw, nbytes = _figure(entry, collective)
    series = entry.get("series")
    body = series.get(name) if isinstance(series, Mapping) and name else None
    points = curve_points(body.get("points") if isinstance(body, Mapping) else None)
    if points:
        return points
    return [[nbytes, busbw]] if busbw is not None and nbytes else []


def curve_points(raw: Any) -> list[list[float]]:
    """Validated ``[[x, y], ...]`` (x > 0, y >= 0, finite; one point per x, the last), ascending."""
    out: dict[float, float] = {}
    for p in raw if isinstance(raw, list) else []:
        if isinstance(p, list | tuple) and len(p) == 2:
            x, y = _value(p[0]), _value(p[1])
            if x and y is not None:
                out[x] = y
    return [[x, out[x]] for x in sorted(out)]


def median_curves(groups: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per group size, over the groups of that size with a figure: how many, the median figure
    (busbw against node count) and the median busbw at each message size (busbw against message
    size). Reads ``network-groups.json`` group entries (dicts), so malformed ones are skipped."""
    figures: dict[int, list[float]] = {}
    at: dict[int, dict[float, list[float]]] = {}
    for g in groups:
        if not isinstance(g, Mapping) or not isinstance(g.get("nodes"), list):
            continue
        figure = _value(g.get("figure"))
        if figure is None:
            continue
        size = len(g["nodes"])
        figures.setdefault(size, []).append(figure)
        for x, y in curve_points(g.get("curve")):
            at.setdefault(size, {}).setdefault(x, []).append(y)
    return [
        {
            "nodes": size,
            "groups": len(values),
            "busbw_median": statistics.median(values),
            "curve": [[x, statistics.median(ys)] for x, ys in sorted(at.get(size, {}).items())],
        }
        for size, values in sorted(figures.items())
    ]


def _value(entry: Any) -> float | None:
    value: Any = entry.get("value") if isinstance(entry, Mapping) else entry
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None  # NaN, inf, negatives: no figure


def parse_cat(text: str) -> dict[str, dict[str, Any] | None]:
    """``CAT_FILES`` output -> path: report dict (None when absent or not JSON)."""
    out: dict[str, dict[str, Any] | None] = {}
    path: str | None = None
    lines: list[str] = []
    for line in [*text.splitlines(), "=== "]:
        if line.startswith("=== "):
            if path is not None:
                try:
                    data = json.loads("\n".join(lines))
                except json.JSONDecodeError:
                    data = None
                out[path] = data if isinstance(data, dict) else None
            path, lines = line[4:], []
        else:
            lines.append(line)
    return out
