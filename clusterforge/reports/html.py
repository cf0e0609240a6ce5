"""The run report for people: HTML rendered from Jinja2 templates (templates/), inline CSS and SVG, no scripts.

Every value that came from a node (ids, summaries, evidence, metric names) reaches the page
through the templates' autoescape: a report is input, and a page that runs what a node wrote
would be a hole. Charts are drawn by svg.py, which escapes its own text, and enter as Markup.

Usable at any size: up to ``INLINE_NODES`` nodes everything is on one page (the matrix of nodes
and checks, every plot, every node's detail). Above that the page holds the aggregate views
(each check's counts and failing nodes, the nodes not certified, the fleet as histograms, the
network's scaling, bus bandwidth as the fleet's band with the worst nodes) and an index of node
pages of ``NODES_PER_PAGE`` nodes each, where each node's checks, evidence and plots are: a page
a browser opens at once, and the rest only when a person drills down (4,096 nodes: a summary page
of a few hundred kB, 64 node pages).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from clusterforge.reports.fleet_view import fleet_view, network_view
from clusterforge.reports.summary import (
    BAD,
    STATUSES,
    Chart,
    NodeRun,
    busbw_charts,
    busbw_fleet_charts,
    checkpoint_charts,
    checks_of,
    columns,
    group_runs,
    matmul_chart,
    num,
)
from clusterforge.reports.svg import bar_chart, fmt_num, line_chart
from clusterforge.slurm.parse import compress_hostlist

INLINE_NODES = 64  # up to this many nodes, one page holds everything
NODES_PER_PAGE = 64
ATTENTION_ROWS = 200  # nodes not certified listed on the summary page; the rest are counted
FAILING_PER_CHECK = 10
PAGES_DIR_SUFFIX = "-nodes"

# reported_node: set by read_reports when a report names another node than its folder.
REPORT_META = (
    "profile",
    "instance_type",
    "hostname",
    "reported_node",
    "started",
    "finished",
    "suite_version",
    "config",
)
_NODE_META = ("profile", "instance_type", "hostname", "started", "finished", "suite_version", "config")

ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=True,  # every value is escaped unless it is Markup (the charts)
    undefined=jinja2.StrictUndefined,
    trim_blocks=False,
    lstrip_blocks=False,
)


def anchor(node: str) -> str:
    return "node-" + re.sub(r"[^A-Za-z0-9_-]", "_", node)


# -- view models: plain values for the templates -------------------------------------------------


def _measures(block: Any) -> list[dict[str, Any]]:
    if not isinstance(block, dict):
        return []
    items = []
    for name, entry in block.items():
        if isinstance(entry, dict):
            value = num(entry.get("value"))
            shown = fmt_num(value) if value is not None else str(entry.get("value"))
            items.append({"name": str(name), "value": shown, "unit": str(entry.get("unit") or "")})
        else:
            items.append({"name": str(name), "value": str(entry), "unit": ""})
    return items


def _evidence(check: dict[str, Any]) -> str:
    ev = check.get("evidence")
    if not isinstance(ev, dict):
        return ""
    lines = (
        [str(x) for x in ev.get("lines") or [] if x is not None] if isinstance(ev.get("lines"), list) else []
    )
    text = f"$ {ev['command']}\n" if ev.get("command") else ""
    warnings = ev.get("warnings") if isinstance(ev.get("warnings"), list) else []
    text += "\n".join(lines + [f"warning: {w}" for w in warnings or [] if isinstance(w, str)])
    return text if text.strip() else ""


def _css(status: str) -> str:
    return status if status in STATUSES else "error"


def node_view(run: NodeRun, history: str = "") -> dict[str, Any]:
    reports = []
    for kind, report in run.reports:
        checks = []
        for check in checks_of(report):
            status = str(check.get("status"))
            duration = num(check.get("duration_s"))
            checks.append(
                {
                    "id": str(check.get("id")),
                    "status": status,
                    "css": _css(status),
                    "summary": str(check.get("summary") or ""),
                    "evidence": _evidence(check),
                    "metrics": _measures(check.get("metrics")),
                    "threshold": _measures(check.get("threshold")),
                    "duration": "" if duration is None else f"{duration:.1f} s",
                }
            )
        meta = [(k, str(report.get(k))) for k in _NODE_META if report.get(k) is not None]
        reports.append({"kind": kind, "verdict": str(report.get("verdict")), "meta": meta, "checks": checks})
    return {
        "node": run.node,
        "anchor": anchor(run.node),
        "verdict": run.verdict,
        "missing": list(run.missing),
        "reports": reports,
        "history": history,
    }


def history_view(
    runs: list[NodeRun], history: Mapping[str, str], href: Callable[[str], str]
) -> dict[str, Any]:
    """The run's nodes with incidents, in ``history``'s order (``health.history.node_history``: lemons
    first, then by strikes held)."""
    in_run = {r.node for r in runs}
    rows = [(node, line) for node, line in history.items() if line and node in in_run]
    return {
        "total": len(rows),
        "lemons": sum(1 for _, line in rows if line.startswith("LEMON")),
        "rows": [{"node": node, "href": href(node), "line": line} for node, line in rows[:ATTENTION_ROWS]],
        "more": max(0, len(rows) - ATTENTION_ROWS),
    }


def matrix_view(runs: list[NodeRun], cols: list[str]) -> dict[str, Any]:
    rows = []
    for run in runs:
        cells = run.cells()
        shown: list[dict[str, str] | None] = []
        for col in cols:
            check = cells.get(col)
            if check is None:
                shown.append(None)
                continue
            status = str(check.get("status"))
            shown.append({"status": status, "css": _css(status), "summary": str(check.get("summary") or "")})
        itype = run.main().get("instance_type")
        rows.append(
            {
                "node": run.node,
                "anchor": anchor(run.node),
                "itype": str(itype) if itype else "",
                "verdict": run.verdict,
                "cells": shown if cells else [],
                "failing": run.failing(),
            }
        )
    return {"cols": cols, "rows": rows}


def header_view(runs: list[NodeRun], stack: str, title: str, generated: str) -> dict[str, Any]:
    verdicts = [r.verdict for r in runs]
    starts = sorted(str(r.get("started")) for run in runs for _, r in run.reports if r.get("started"))
    ends = sorted(str(r.get("finished")) for run in runs for _, r in run.reports if r.get("finished"))
    profiles = sorted({str(r.get("profile")) for run in runs for _, r in run.reports if r.get("profile")})
    statuses = Counter(str(c.get("status")) for run in runs for _, r in run.reports for c in checks_of(r))
    return {
        "title": title,
        "stack": stack,
        "span": f"{starts[0]} to {ends[-1]}" if starts and ends else "no timestamps",
        "profiles": ", ".join(profiles) or "-",
        "generated": generated,
        "nodes": len(runs),
        "node_counts": [(v, verdicts.count(v)) for v in ("pass", "fail", "no report")],
        "checks": sum(statuses.values()),
        "check_counts": [(s, statuses.get(s, 0)) for s in STATUSES],
    }


def _chart(chart: Chart) -> Markup:
    if chart.kind == "line":
        return Markup(line_chart(chart.title, chart.series, chart.hlines, y_unit=chart.y_unit))
    return Markup(bar_chart(chart.title, chart.groups, chart.hlines, y_unit=chart.y_unit))


def plots_view(runs: list[NodeRun], fleet_band: bool = False) -> dict[str, Any]:
    """Bus bandwidth, matmul and checkpoint charts of ``runs``; ``fleet_band``: bus bandwidth as
    the fleet's median and spread with the worst nodes, and no per-node charts (the summary page
    of a large run: the node pages hold those)."""
    blocks = []
    if fleet_band:
        busbw = busbw_fleet_charts(runs)
        note = (
            "The median and the 10th and 90th percentiles over the nodes at each size, with the lowest nodes."
        )
    else:
        busbw, note = busbw_charts(runs), ""
    if busbw:
        blocks.append(
            {
                "title": "Bus bandwidth against message size",
                "note": note,
                "charts": [_chart(c) for c in busbw],
            }
        )
    if not fleet_band:
        matmul = [c for c in (matmul_chart(r) for r in runs) if c is not None]
        if matmul:
            blocks.append(
                {"title": "Matmul rate per device", "note": "", "charts": [_chart(c) for c in matmul]}
            )
        ckpt = checkpoint_charts(runs)
        if ckpt:
            blocks.append({"title": "Checkpoint throughput", "note": "", "charts": [_chart(c) for c in ckpt]})
    return {"blocks": blocks}


def checks_view(runs: list[NodeRun], cols: list[str], href: Callable[[str], str]) -> list[dict[str, Any]]:
    """Per check column: how many nodes in each status, and the first failing nodes."""
    out = []
    for col in cols:
        counts: Counter[str] = Counter()
        failing: list[str] = []
        for run in runs:
            check = run.cells().get(col)
            if check is None:
                counts["not run"] += 1
                continue
            status = _css(str(check.get("status")))
            counts[status] += 1
            if status in BAD:
                failing.append(run.node)
        out.append(
            {
                "id": col,
                "counts": [counts[s] for s in STATUSES],
                "not_run": counts["not run"],
                "failing": [(n, href(n)) for n in failing[:FAILING_PER_CHECK]],
                "more": max(0, len(failing) - FAILING_PER_CHECK),
            }
        )
    return out


# -- pages -----------------------------------------------------------------------------------


def render_run_pages(
    reports: list[dict[str, Any]],
    *,
    stack: str,
    title: str | None = None,
    generated: str | None = None,
    fleet: dict[str, Any] | None = None,
    network: dict[str, Any] | None = None,
    page_name: str = "report.html",
    history: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The run's pages: ``{"": the summary page, "<stem>-nodes/001.html": a page of nodes, ...}``
    where the summary page is ``page_name`` (no node pages up to ``INLINE_NODES`` nodes: the
    summary page holds everything).

    ``reports``: validators report.json dicts (any order, one or more per node; ``"kind":
    "network"`` for a network-report.json) and ``{"node", "missing"}`` entries for nodes whose
    report is absent (shown as "no report"). ``fleet`` (reports/fleet.json) and ``network``
    (reports/network-groups.json) add the fleet view and the group tests. ``history`` (node -> its
    incident line, ``health.history.node_history``) adds each node's strikes, last incident and mean
    time between incidents, and a section listing the nodes that have any."""
    history = history or {}
    runs = group_runs(reports)
    pages_dir = Path(page_name).stem + PAGES_DIR_SUFFIX
    title = title or f"clusterforge certification: {stack}"
    generated = generated or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    head = header_view(runs, stack, title, generated)
    failing = sum(1 for r in runs if r.verdict != "pass")
    cols = columns(runs)
    inline = len(runs) <= INLINE_NODES
    chunks = [] if inline else [runs[i : i + NODES_PER_PAGE] for i in range(0, len(runs), NODES_PER_PAGE)]
    where = {run.node: f"{pages_dir}/{i + 1:03d}.html" for i, chunk in enumerate(chunks) for run in chunk}

    def href(node: str) -> str:
        return f"{where[node]}#{anchor(node)}" if node in where else f"#{anchor(node)}"

    context: dict[str, Any] = {
        "head": head,
        "failing": failing,
        "inline": inline,
        "fleet": fleet_view(fleet, reports, href),
        "network": network_view(network, full=inline),
        "plots": plots_view(runs, fleet_band=not inline),
        "statuses": STATUSES,
        "history": history_view(runs, history, href),
    }
    if inline:
        context.update(
            matrix=matrix_view(runs, cols), nodes=[node_view(r, history.get(r.node, "")) for r in runs]
        )
    else:
        bad = [r for r in runs if r.verdict != "pass"]
        context.update(
            checks=checks_view(runs, cols, href),
            attention={
                "total": len(bad),
                "rows": [
                    {"node": r.node, "href": href(r.node), "verdict": r.verdict, "failing": r.failing()}
                    for r in bad[:ATTENTION_ROWS]
                ],
                "more": max(0, len(bad) - ATTENTION_ROWS),
            },
            per_page=NODES_PER_PAGE,
            pages=[
                {
                    "number": i + 1,
                    "href": f"{pages_dir}/{i + 1:03d}.html",
                    "hostlist": compress_hostlist(r.node for r in chunk),
                    "count": len(chunk),
                    "failing": sum(1 for r in chunk if r.verdict != "pass"),
                }
                for i, chunk in enumerate(chunks)
            ],
        )
    pages = {"": ENV.get_template("report.html.j2").render(context) + "\n"}
    page = ENV.get_template("nodes.html.j2")
    for i, chunk in enumerate(chunks):
        name = f"{i + 1:03d}.html"
        pages[f"{pages_dir}/{name}"] = (
            page.render(
                head=head,
                number=i + 1,
                total=len(chunks),
                hostlist=compress_hostlist(r.node for r in chunk),
                main=f"../{page_name}",
                prev=f"{i:03d}.html" if i else "",
                next=f"{i + 2:03d}.html" if i + 1 < len(chunks) else "",
                matrix=matrix_view(chunk, columns(chunk)),
                plots=plots_view(chunk),
                nodes=[node_view(r, history.get(r.node, "")) for r in chunk],
            )
            + "\n"
        )
    return pages


def render_run_html(reports: list[dict[str, Any]], *, stack: str, **kwargs: Any) -> str:
    """The summary page of a run (everything, up to ``INLINE_NODES`` nodes); see render_run_pages."""
    return render_run_pages(reports, stack=stack, **kwargs)[""]
