"""The fleet view of the people's report: each metric's nodes against the reference and the band,
and the network's group tests (busbw against group size, busbw against message size per group
size, each group's figure), as values for the templates (html.py).

Reads what the certify stage writes beside the node reports: ``reports/fleet.json``
(pipeline/fleet_stage.py) and ``reports/network-groups.json`` (certify/network/rounds.py). The
plots are inline SVG drawn here and in svg.py, every string from a node through ``html.escape``;
they enter the templates as Markup. No scripts.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from html import escape
from typing import Any

from markupsafe import Markup

from clusterforge.certify.network.figures import median_curves
from clusterforge.reports.summary import num
from clusterforge.reports.svg import Series, fmt_bytes, fmt_num, line_chart
from clusterforge.slurm.parse import compress_hostlist

WIDTH, ROW, PAD = 560, 26, 70


def _esc(value: Any) -> str:
    return escape(str(value), quote=True)


def _axis(
    group: dict[str, Any],
) -> tuple[dict[str, float], dict[str, float | None], float, float] | None:
    """A metric's node values, its reference and limits, and the value range that holds them all
    (widened when every figure is the same); None without a value."""
    values = {str(n): v for n, raw in (group.get("values") or {}).items() if (v := num(raw)) is not None}
    if not values:
        return None
    marks = {k: num(group.get(k)) for k in ("reference", "warn_at", "fail_at")}
    every = [*values.values(), *(m for m in marks.values() if m is not None)]
    lo, hi = min(every), max(every)
    if hi == lo:
        lo, hi = lo * 0.9 if lo else -1.0, hi * 1.1 if hi else 1.0
    return values, marks, lo, hi


_MARK_STYLES = {"reference": ("#333", ""), "warn_at": ("#d90", "4,3"), "fail_at": ("#b00", "4,3")}
_MARK_LABELS = {"reference": "ref", "warn_at": "warn", "fail_at": "fail"}


def _mark_lines(
    marks: dict[str, float | None], x: Callable[[float], float], y1: float, y2: float
) -> list[str]:
    """The reference (solid) and the warn and fail limits (dashed) from ``y1`` to ``y2``, labelled above."""
    parts = []
    for key, value in marks.items():
        if value is None:
            continue
        colour, dash = _MARK_STYLES[key]
        label = _MARK_LABELS[key]
        parts.append(
            f"<line x1='{x(value):.1f}' y1='{y1}' x2='{x(value):.1f}' y2='{y2}' stroke='{colour}' "
            f"stroke-dasharray='{dash}'><title>{label} {fmt_num(value)}</title></line>"
        )
        parts.append(
            f"<text x='{x(value):.1f}' y='{y1 - 4}' text-anchor='middle' fill='{colour}'>{label}</text>"
        )
    return parts


def strip_plot(group: dict[str, Any], statuses: dict[str, str]) -> str:
    """One metric: a dot per node on a value axis, the reference (solid) and the warn and fail
    limits (dashed); dots of nodes that warned or failed are coloured and labelled."""
    axis = _axis(group)
    if axis is None:
        return ""
    values, marks, lo, hi = axis
    span = hi - lo

    def x(v: float) -> float:
        return PAD + (v - lo) / span * (WIDTH - 2 * PAD)

    height = 64
    parts = [f"<svg class='chart' width='{WIDTH}' height='{height}' role='img'>"]
    parts.append(f"<line x1='{PAD}' y1='40' x2='{WIDTH - PAD}' y2='40' stroke='#999'/>")
    for v in (lo, hi):
        parts.append(f"<text x='{x(v):.1f}' y='58' text-anchor='middle'>{fmt_num(v)}</text>")
    parts += _mark_lines(marks, x, 16, 48)
    for node, value in sorted(values.items()):
        status = statuses.get(node, "pass")
        colour = {"fail": "#b00", "warn": "#d90"}.get(status, "#16691a")
        parts.append(
            f"<circle cx='{x(value):.1f}' cy='40' r='5' fill='{colour}' fill-opacity='0.7'>"
            f"<title>{_esc(node)}: {fmt_num(value)} ({_esc(status)})</title></circle>"
        )
        if status in ("fail", "warn"):
            parts.append(f"<text x='{x(value):.1f}' y='30' text-anchor='middle'>{_esc(node)}</text>")
    parts.append("</svg>")
    return "".join(parts)


def histogram_plot(group: dict[str, Any], statuses: dict[str, str], bins: int = 40) -> str:
    """One metric over many nodes: how many nodes in each band of values (bars), the reference
    (solid) and the warn and fail limits (dashed); the bands holding warned or failed nodes are
    coloured. A dot per node stops being readable (and grows the page) past a few hundred."""
    axis = _axis(group)
    if axis is None:
        return ""
    values, marks, lo, hi = axis
    span = hi - lo
    width = (hi - lo) / bins
    counts = [0] * bins
    worst = ["pass"] * bins
    rank = {"pass": 0, "warn": 1, "fail": 2}
    for node, value in values.items():
        i = min(bins - 1, int((value - lo) / width))
        counts[i] += 1
        status = statuses.get(node, "pass")
        if rank.get(status, 0) > rank.get(worst[i], 0):
            worst[i] = status
    tallest = max(counts)

    def x(v: float) -> float:
        return PAD + (v - lo) / span * (WIDTH - 2 * PAD)

    height, base, top = 124, 84, 20
    parts = [
        f"<svg class='chart histogram' width='{WIDTH}' height='{height}' role='img' data-nodes='{len(values)}'>"
    ]
    for i, count in enumerate(counts):
        if not count:
            continue
        h = max(1.0, (base - top) * count / tallest)
        colour = {"fail": "#b00", "warn": "#d90"}.get(worst[i], "#16691a")
        parts.append(
            f"<rect class='bin' x='{x(lo + i * width):.1f}' y='{base - h:.1f}' width='{max(1.0, x(lo + (i + 1) * width) - x(lo + i * width) - 1):.1f}' "
            f"height='{h:.1f}' fill='{colour}' fill-opacity='0.7' data-count='{count}'>"
            f"<title>{count} node(s) from {fmt_num(lo + i * width)} to {fmt_num(lo + (i + 1) * width)}</title></rect>"
        )
    parts.append(f"<line x1='{PAD}' y1='{base}' x2='{WIDTH - PAD}' y2='{base}' stroke='#999'/>")
    for v in (lo, hi):
        parts.append(f"<text x='{x(v):.1f}' y='{base + 16}' text-anchor='middle'>{fmt_num(v)}</text>")
    parts += _mark_lines(marks, x, top - 4, base)
    parts.append(
        f"<text x='{WIDTH - PAD}' y='{height - 4}' text-anchor='end'>{len(values)} nodes; the tallest band holds {tallest}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


STRIP_NODES = 200  # up to this many nodes a metric is a dot per node; above, a histogram
OUTLIERS_SHOWN = 20


def _statuses(reports: list[dict[str, Any]], metric: str) -> dict[str, str]:
    out = {}
    for report in reports:
        fleet = report.get("fleet") if isinstance(report, dict) else None
        for m in (fleet or {}).get("metrics") or []:
            if isinstance(m, dict) and m.get("metric") == metric:
                out[str(report.get("node"))] = str(m.get("status"))
    return out


def fleet_view(
    fleet: dict[str, Any] | None, reports: list[dict[str, Any]], href: Callable[[str], str]
) -> dict[str, Any] | None:
    """Rows of the fleet section (each metric's plot, reference and outliers), or None."""
    if not isinstance(fleet, dict) or not isinstance(fleet.get("groups"), list) or not fleet["groups"]:
        return None
    rows = []
    for g in fleet["groups"]:
        if not isinstance(g, dict):
            continue
        metric = str(g.get("metric"))
        statuses = _statuses(reports, metric)
        many = isinstance(g.get("values"), dict) and len(g["values"]) > STRIP_NODES
        plot = histogram_plot(g, statuses) if many else strip_plot(g, statuses)
        if not plot:
            continue
        ref = num(g.get("reference"))
        outliers = sorted(n for n, s in statuses.items() if s in ("fail", "warn")) if many else []
        rows.append(
            {
                "metric": metric,
                "instance_type": str(g.get("instance_type")),
                "unit": str(g.get("unit")),
                "where": f"{g.get('reference_kind')} {fmt_num(ref)}" if ref is not None else "no reference",
                "note": str(g.get("note") or ""),
                "plot": Markup(plot),
                "outliers": [(n, href(n)) for n in outliers[:OUTLIERS_SHOWN]],
                "more": max(0, len(outliers) - OUTLIERS_SHOWN),
            }
        )
    if not rows:
        return None
    notes = fleet.get("notes")
    return {"rows": rows, "notes": [str(n) for n in notes] if isinstance(notes, list) else []}


def scaling_charts(groups: list[Any]) -> tuple[list[Markup], dict[str, Any] | None]:
    """Two inline SVG line charts, side by side: the median busbw against the group size (node
    count), and against the message size (log2 x) with one line per group size, each point the
    median over that size's groups (curves from rank 0's report, certify/network/rounds.py); and
    the numbers behind the second (group sizes down, message sizes across)."""
    sizes = median_curves(groups)
    if not sizes:
        return [], None
    charts = [
        Markup(
            line_chart(
                "busbw against group size (median over groups)",
                [Series("median busbw", [(float(s["nodes"]), s["busbw_median"]) for s in sizes])],
                [],
                x_unit="nodes",
                y_unit="GB/s",
                x_log2=False,
            )
        )
    ]
    curves = [Series(f"{s['nodes']} nodes", [(x, y) for x, y in s["curve"]]) for s in sizes if s["curve"]]
    if curves:
        charts.append(
            Markup(
                line_chart(
                    "busbw against message size, per group size (median over groups)",
                    curves,
                    [],
                    y_unit="GB/s",
                )
            )
        )
    xs = sorted({x for s in sizes for x, _ in s["curve"]})
    if not xs:
        return charts, None
    rows = []
    for s in sizes:
        at = dict((x, y) for x, y in s["curve"])
        rows.append(
            {
                "nodes": s["nodes"],
                "groups": s["groups"],
                "cells": [fmt_num(at[x]) if x in at else "-" for x in xs],
            }
        )
    return charts, {"xs": [fmt_bytes(x) for x in xs], "rows": rows}


GROUP_ROWS = 100  # group tests listed on a large run's page: those without a passing figure first


def network_view(network: dict[str, Any] | None, full: bool = True) -> dict[str, Any] | None:
    """The network section: scaling, links, charts and the group tests (every one when ``full``;
    else those that did not end "done" and the first others, up to ``GROUP_ROWS``)."""
    if not isinstance(network, dict) or not isinstance(network.get("groups"), list) or not network["groups"]:
        return None
    by_size: dict[int, list[float]] = {}
    tests = []
    for g in network["groups"]:
        if not isinstance(g, dict):
            continue
        nodes = [str(n) for n in g.get("nodes") or []]
        figure = num(g.get("figure"))
        if figure is not None:
            by_size.setdefault(len(nodes), []).append(figure)
        tests.append(
            {
                "round": str(g.get("round")),
                "purpose": str(g.get("purpose")),
                "nodes": " + ".join(nodes)
                if len(nodes) <= 8
                else f"{compress_hostlist(nodes)} ({len(nodes)} nodes)",
                "figure": "no result" if figure is None else f"{fmt_num(figure)} GB/s",
                "state": str(g.get("state")),
                "done": g.get("state") == "done",
            }
        )
    pair = statistics.median(by_size[2]) if by_size.get(2) else None
    scaling = [
        {
            "size": size,
            "groups": len(vals),
            "median": fmt_num(statistics.median(vals)),
            "min": fmt_num(min(vals)),
            "max": fmt_num(max(vals)),
            "ratio": f"{statistics.median(vals) / pair:.2f}" if pair else "-",
        }
        for size, vals in sorted(by_size.items())
    ]
    charts, curve = scaling_charts(network["groups"])
    links = [
        (str(link.get("kind")), str(link.get("reason")))
        for link in network.get("links") or []
        if isinstance(link, dict)
    ]
    title, note = "Every group test", ""
    if not full and len(tests) > GROUP_ROWS:
        ordered = sorted(tests, key=lambda t: t["done"])
        note = (
            f"{len(tests)} group tests; the {GROUP_ROWS} shown start with those that gave no result. "
            "Every one is in reports/network-groups.json."
        )
        tests, title = ordered[:GROUP_ROWS], "Group tests"
    return {
        "problem": str(network.get("problem") or ""),
        "rounds": str(network.get("rounds")),
        "jobs": str(network.get("jobs")),
        "links": links,
        "scaling": scaling,
        "charts": charts,
        "curve": curve,
        "tests": tests,
        "tests_title": title,
        "tests_note": note,
    }
