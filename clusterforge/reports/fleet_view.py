"""The fleet view of the people's report: each metric's nodes against the reference and the band,
and the network's group tests (busbw against group size, busbw against message size per group
size, each group's figure).

Reads what the certify stage writes beside the node reports: ``reports/fleet.json``
(pipeline/fleet_stage.py) and ``reports/network-groups.json`` (certify/group_runner.py). Inline
SVG, no scripts; every string from a node goes through ``html.escape``.
"""

from __future__ import annotations

import statistics
from html import escape
from typing import Any

from clusterforge.certify.network.figures import median_curves
from clusterforge.reports.summary import num
from clusterforge.reports.svg import Series, fmt_bytes, fmt_num, line_chart

WIDTH, ROW, PAD = 560, 26, 70


def _esc(value: Any) -> str:
    return escape(str(value), quote=True)


def strip_plot(group: dict[str, Any], statuses: dict[str, str]) -> str:
    """One metric: a dot per node on a value axis, the reference (solid) and the warn and fail
    limits (dashed); dots of nodes that warned or failed are coloured and labelled."""
    values = {str(n): v for n, raw in (group.get("values") or {}).items() if (v := num(raw)) is not None}
    if not values:
        return ""
    marks = {k: num(group.get(k)) for k in ("reference", "warn_at", "fail_at")}
    every = [*values.values(), *(m for m in marks.values() if m is not None)]
    lo, hi = min(every), max(every)
    if hi == lo:
        lo, hi = lo * 0.9 if lo else -1.0, hi * 1.1 if hi else 1.0
    span = hi - lo

    def x(v: float) -> float:
        return PAD + (v - lo) / span * (WIDTH - 2 * PAD)

    height = 64
    parts = [f"<svg class='chart' width='{WIDTH}' height='{height}' role='img'>"]
    parts.append(f"<line x1='{PAD}' y1='40' x2='{WIDTH - PAD}' y2='40' stroke='#999'/>")
    for v in (lo, hi):
        parts.append(f"<text x='{x(v):.1f}' y='58' text-anchor='middle'>{fmt_num(v)}</text>")
    styles = {"reference": ("#333", ""), "warn_at": ("#d90", "4,3"), "fail_at": ("#b00", "4,3")}
    for key, value in marks.items():
        if value is None:
            continue
        colour, dash = styles[key]
        label = {"reference": "ref", "warn_at": "warn", "fail_at": "fail"}[key]
        parts.append(
            f"<line x1='{x(value):.1f}' y1='16' x2='{x(value):.1f}' y2='48' stroke='{colour}' "
            f"stroke-dasharray='{dash}'><title>{label} {fmt_num(value)}</title></line>"
        )
        parts.append(f"<text x='{x(value):.1f}' y='12' text-anchor='middle' fill='{colour}'>{label}</text>")
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


def _statuses(reports: list[dict[str, Any]], metric: str) -> dict[str, str]:
    out = {}
    for report in reports:
        fleet = report.get("fleet") if isinstance(report, dict) else None
        for m in (fleet or {}).get("metrics") or []:
            if isinstance(m, dict) and m.get("metric") == metric:
                out[str(report.get("node"))] = str(m.get("status"))
    return out


def fleet_section(fleet: dict[str, Any] | None, reports: list[dict[str, Any]]) -> str:
    if not isinstance(fleet, dict) or not fleet.get("groups"):
        return ""
    rows = []
    for g in fleet["groups"]:
        if not isinstance(g, dict):
            continue
        metric = str(g.get("metric"))
        plot = strip_plot(g, _statuses(reports, metric))
        if not plot:
            continue
        ref = num(g.get("reference"))
        where = f"{_esc(g.get('reference_kind'))} {fmt_num(ref)}" if ref is not None else "no reference"
        note = f"<br><span class='meta'>{_esc(g.get('note'))}</span>" if g.get("note") else ""
        rows.append(
            f"<tr><td><code>{_esc(metric)}</code><br>{_esc(g.get('instance_type'))}, {_esc(g.get('unit'))}"
            f"<br>reference: {where}{note}</td><td>{plot}</td></tr>"
        )
    if not rows:
        return ""
    notes = "".join(f"<li>{_esc(n)}</li>" for n in fleet.get("notes") or [])
    return (
        "<section id='fleet'><h2>Fleet</h2><p class='meta'>Each node's figure against its instance type's "
        "reference (this run's median, the stored baseline or the floor) and the warn and fail limits.</p>"
        f"{f'<ul>{notes}</ul>' if notes else ''}<table>{''.join(rows)}</table></section>"
    )


def scaling_charts(groups: list[Any]) -> str:
    """Two inline SVG line charts, side by side: the median busbw against the group size (node
    count), and against the message size (log2 x) with one line per group size, each point the
    median over that size's groups (curves from rank 0's report, certify/group_runner.py)."""
    sizes = median_curves(groups)
    if not sizes:
        return ""
    scaling = line_chart(
        "busbw against group size (median over groups)",
        [Series("median busbw", [(float(s["nodes"]), s["busbw_median"]) for s in sizes])],
        [],
        x_unit="nodes",
        y_unit="GB/s",
        x_log2=False,
    )
    curves = [Series(f"{s['nodes']} nodes", [(x, y) for x, y in s["curve"]]) for s in sizes if s["curve"]]
    by_message = (
        line_chart(
            "busbw against message size, per group size (median over groups)", curves, [], y_unit="GB/s"
        )
        if curves
        else ""
    )
    return f"<div class='charts'>{scaling}{by_message}</div>{_curve_table(sizes)}"


def _curve_table(sizes: list[dict[str, Any]]) -> str:
    """The numbers behind the message-size chart: group sizes down, message sizes across."""
    xs = sorted({x for s in sizes for x, _ in s["curve"]})
    if not xs:
        return ""
    head = "".join(f"<th>{_esc(fmt_bytes(x))}</th>" for x in xs)
    rows = []
    for s in sizes:
        at = dict((x, y) for x, y in s["curve"])
        cells = "".join(f"<td>{fmt_num(at[x]) if x in at else '-'}</td>" for x in xs)
        rows.append(f"<tr><td>{_esc(s['nodes'])}</td><td>{_esc(s['groups'])}</td>{cells}</tr>")
    return (
        "<table class='curves'><tr><th>nodes</th><th>groups</th>"
        f"{head}</tr>{''.join(rows)}</table><p class='meta'>median busbw (GB/s) by message size</p>"
    )


def network_section(network: dict[str, Any] | None) -> str:
    if not isinstance(network, dict) or not network.get("groups"):
        return ""
    by_size: dict[int, list[float]] = {}
    rows = []
    for g in network["groups"]:
        if not isinstance(g, dict):
            continue
        nodes = [str(n) for n in g.get("nodes") or []]
        figure = num(g.get("figure"))
        if figure is not None:
            by_size.setdefault(len(nodes), []).append(figure)
        shown = "no result" if figure is None else f"{fmt_num(figure)} GB/s"
        rows.append(
            f"<tr><td>{_esc(g.get('round'))}</td><td>{_esc(g.get('purpose'))}</td>"
            f"<td>{_esc(' + '.join(nodes))}</td><td>{shown}</td><td>{_esc(g.get('state'))}</td></tr>"
        )
    pair = statistics.median(by_size[2]) if by_size.get(2) else None
    scaling = "".join(
        f"<tr><td>{size}</td><td>{len(vals)}</td><td>{fmt_num(statistics.median(vals))}</td>"
        f"<td>{fmt_num(min(vals))}</td><td>{fmt_num(max(vals))}</td>"
        f"<td>{f'{statistics.median(vals) / pair:.2f}' if pair else '-'}</td></tr>"
        for size, vals in sorted(by_size.items())
    )
    links = "".join(
        f"<li>{_esc(link.get('kind'))}: {_esc(link.get('reason'))}</li>"
        for link in network.get("links") or []
        if isinstance(link, dict)
    )
    problem = f"<p class='v-fail'>{_esc(network['problem'])}</p>" if network.get("problem") else ""
    return (
        f"<section id='network'><h2>Network: group tests</h2>{problem}"
        f"<p class='meta'>{_esc(network.get('rounds'))} round(s), {_esc(network.get('jobs'))} job(s).</p>"
        f"{f'<p>Links:</p><ul>{links}</ul>' if links else ''}"
        "<h3>busbw by group size (scaling)</h3><table><tr><th>nodes</th><th>groups</th><th>median GB/s</th>"
        f"<th>min</th><th>max</th><th>/ 2-node median</th></tr>{scaling}</table>"
        f"{scaling_charts(network['groups'])}"
        "<h3>Every group test</h3><table><tr><th>round</th><th>purpose</th><th>nodes</th><th>busbw</th>"
        f"<th>job</th></tr>{''.join(rows)}</table></section>"
    )
