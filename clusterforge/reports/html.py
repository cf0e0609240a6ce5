"""The run report for people: one self-contained HTML file (inline CSS and SVG, no scripts).

Every string that came from a node (ids, summaries, evidence, metric names) goes through
``html.escape``: a report is input, and a page that runs what a node wrote would be a hole.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import escape
from typing import Any

from clusterforge.reports.fleet_view import fleet_section, network_section
from clusterforge.reports.summary import (
    STATUSES,
    Chart,
    NodeRun,
    busbw_charts,
    checkpoint_charts,
    checks_of,
    columns,
    group_runs,
    matmul_chart,
    num,
)
from clusterforge.reports.svg import bar_chart, fmt_num, line_chart

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{margin:0 0 .2em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}
.meta{color:#555}.counts span{display:inline-block;margin-right:1em}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top}
th{background:#f4f4f4;text-align:left}
.matrix th.col{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;white-space:nowrap}
.matrix td.st{text-align:center;font-size:12px}
.st-pass{background:#d8f0d8}.st-fail{background:#f6c6c6;font-weight:bold}.st-error{background:#f0b0e0;font-weight:bold}
.st-warn{background:#fbe7b5}.st-skip{background:#eee;color:#777}.st-none{background:#fff;color:#aaa}
.st-norep{background:#f6c6c6;font-style:italic}
.v-pass{color:#16691a;font-weight:bold}.v-fail,.v-no-report{color:#b00;font-weight:bold}
.findings{margin:0;padding-left:1.2em}
details.node{margin:.5em 0;border:1px solid #ccc;padding:.3em .6em}
details.node>summary{cursor:pointer;font-weight:bold}
pre{background:#f8f8f8;padding:.4em;white-space:pre-wrap;margin:.2em 0;font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #eee;background:#fff}
.chart text{font:11px system-ui,sans-serif}.chart .chart-title{font-size:13px;font-weight:bold}
dl.kv{display:grid;grid-template-columns:max-content auto;gap:0 1em}dl.kv dt{color:#555}dl.kv dd{margin:0}
"""
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


def esc(value: Any) -> str:
    return escape(str(value), quote=True)


def anchor(node: str) -> str:
    return "node-" + re.sub(r"[^A-Za-z0-9_-]", "_", node)


def _measures(block: Any) -> str:
    if not isinstance(block, dict) or not block:
        return ""
    items = []
    for name, entry in block.items():
        if isinstance(entry, dict):
            value = num(entry.get("value"))
            shown = fmt_num(value) if value is not None else esc(entry.get("value"))
            items.append(f"<li><code>{esc(name)}</code> {shown} {esc(entry.get('unit') or '')}</li>")
        else:
            items.append(f"<li><code>{esc(name)}</code> {esc(entry)}</li>")
    return f"<ul class='findings'>{''.join(items)}</ul>"


def _chart(chart: Chart) -> str:
    if chart.kind == "line":
        return line_chart(chart.title, chart.series, chart.hlines, y_unit=chart.y_unit)
    return bar_chart(chart.title, chart.groups, chart.hlines, y_unit=chart.y_unit)


def _header(runs: list[NodeRun], stack: str, title: str, generated: str) -> str:
    verdicts = [r.verdict for r in runs]
    starts = sorted(str(r.get("started")) for run in runs for _, r in run.reports if r.get("started"))
    ends = sorted(str(r.get("finished")) for run in runs for _, r in run.reports if r.get("finished"))
    profiles = sorted({str(r.get("profile")) for run in runs for _, r in run.reports if r.get("profile")})
    checks = [c for run in runs for _, r in run.reports for c in checks_of(r)]
    span = f"{starts[0]} to {ends[-1]}" if starts and ends else "no timestamps"
    node_counts = "".join(
        f"<span class='v-{v.replace(' ', '-')}'>{esc(v)}: {verdicts.count(v)}</span>"
        for v in ("pass", "fail", "no report")
    )
    check_counts = "".join(
        f"<span class='st-{s}'>{s}: {sum(1 for c in checks if c.get('status') == s)}</span>" for s in STATUSES
    )
    return (
        f"<header><h1>{esc(title)}</h1>"
        f"<p class='meta'>stack <b>{esc(stack)}</b> · run {esc(span)} · profile {esc(', '.join(profiles) or '-')}"
        f" · page generated {esc(generated)}</p>"
        f"<p class='counts'><b>nodes ({len(runs)})</b> {node_counts}</p>"
        f"<p class='counts'><b>checks ({len(checks)})</b> {check_counts}</p></header>"
    )


def _matrix(runs: list[NodeRun], cols: list[str]) -> str:
    head = "".join(f"<th class='col'>{esc(c)}</th>" for c in cols)
    rows = []
    for run in runs:
        cells = run.cells()
        verdict = run.verdict
        itype = run.main().get("instance_type")
        kind = f"<br><small>{esc(itype)}</small>" if itype else ""
        node = f"<td><a href='#{anchor(run.node)}'>{esc(run.node)}</a>{kind}</td>"
        vcell = f"<td class='v-{verdict.replace(' ', '-')}'>{esc(verdict)}</td>"
        if not cells:
            body = f"<td class='st-norep' colspan='{max(len(cols), 1)}'>no report</td>"
        else:
            body = ""
            for col in cols:
                check = cells.get(col)
                if check is None:
                    body += "<td class='st st-none' title='not run'>-</td>"
                    continue
                status = str(check.get("status"))
                css = status if status in STATUSES else "error"
                body += (
                    f"<td class='st st-{css}' title='{esc(check.get('summary') or '')}'>{esc(status)}</td>"
                )
        findings = "".join(f"<li><code>{esc(cid)}</code>: {esc(why)}</li>" for cid, why in run.failing())
        rows.append(f"<tr>{node}{vcell}{body}<td><ul class='findings'>{findings}</ul></td></tr>")
    return (
        "<section id='matrix'><h2>Nodes × checks</h2><table class='matrix'>"
        f"<thead><tr><th>node</th><th>verdict</th>{head}<th>failing checks</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )


def _plots(runs: list[NodeRun]) -> str:
    parts = []
    busbw = busbw_charts(runs)
    if busbw:
        parts.append("<h3>Bus bandwidth against message size</h3>")
        parts.append(f"<div class='charts'>{''.join(_chart(c) for c in busbw)}</div>")
    matmul = [c for c in (matmul_chart(r) for r in runs) if c is not None]
    if matmul:
        parts.append("<h3>Matmul rate per device</h3>")
        parts.append(f"<div class='charts'>{''.join(_chart(c) for c in matmul)}</div>")
    ckpt = checkpoint_charts(runs)
    if ckpt:
        parts.append("<h3>Checkpoint throughput</h3>")
        parts.append(f"<div class='charts'>{''.join(_chart(c) for c in ckpt)}</div>")
    if not parts:
        parts.append("<p>No report carries bus bandwidth, matmul or checkpoint figures.</p>")
    return f"<section id='plots'><h2>Plots</h2>{''.join(parts)}</section>"


def _evidence(check: dict[str, Any]) -> str:
    ev = check.get("evidence")
    if not isinstance(ev, dict):
        return ""
    lines = (
        [str(x) for x in ev.get("lines") or [] if x is not None] if isinstance(ev.get("lines"), list) else []
    )
    text = ""
    if ev.get("command"):
        text += f"$ {ev['command']}\n"
    text += "\n".join(lines + [f"warning: {w}" for w in ev.get("warnings") or [] if isinstance(w, str)])
    return f"<details><summary>evidence</summary><pre>{esc(text)}</pre></details>" if text.strip() else ""


def _node(run: NodeRun) -> str:
    verdict = run.verdict
    opened = " open" if verdict != "pass" else ""
    parts = [
        f"<details class='node' id='{anchor(run.node)}'{opened}><summary>{esc(run.node)} — "
        f"<span class='v-{verdict.replace(' ', '-')}'>{esc(verdict)}</span></summary>"
    ]
    for why in run.missing:
        parts.append(f"<p class='st-norep'>no report: {esc(why)}</p>")
    for kind, report in run.reports:
        meta = "".join(
            f"<dt>{esc(k)}</dt><dd>{esc(report.get(k))}</dd>"
            for k in (
                "profile",
                "instance_type",
                "hostname",
                "started",
                "finished",
                "suite_version",
                "config",
            )
            if report.get(k) is not None
        )
        parts.append(
            f"<h4>{esc(kind)} report: verdict {esc(report.get('verdict'))}</h4><dl class='kv'>{meta}</dl>"
        )
        rows = []
        for check in checks_of(report):
            status = str(check.get("status"))
            css = status if status in STATUSES else "error"
            duration = num(check.get("duration_s"))
            rows.append(
                f"<tr><td><code>{esc(check.get('id'))}</code></td><td class='st-{css}'>{esc(status)}</td>"
                f"<td>{esc(check.get('summary') or '')}{_evidence(check)}</td>"
                f"<td>{_measures(check.get('metrics'))}</td><td>{_measures(check.get('threshold'))}</td>"
                f"<td>{'' if duration is None else f'{duration:.1f} s'}</td></tr>"
            )
        parts.append(
            "<table><thead><tr><th>check</th><th>status</th><th>summary</th><th>metrics</th>"
            f"<th>thresholds</th><th>time</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    parts.append("</details>")
    return "".join(parts)


def render_run_html(
    reports: list[dict[str, Any]],
    *,
    stack: str,
    title: str | None = None,
    generated: str | None = None,
    fleet: dict[str, Any] | None = None,
    network: dict[str, Any] | None = None,
) -> str:
    """The page for one certification run. ``reports``: validators report.json dicts (any order, one
    or more per node; ``"kind": "network"`` for a network-report.json) and ``{"node", "missing"}``
    entries for nodes whose report is absent (shown as "no report"). ``fleet`` (reports/fleet.json)
    and ``network`` (reports/network-groups.json) add the fleet view and the group tests."""
    runs = group_runs(reports)
    title = title or f"clusterforge certification: {stack}"
    generated = generated or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    failing = sum(1 for r in runs if r.verdict != "pass")
    nodes = "".join(_node(r) for r in runs) or "<p>No nodes in this run.</p>"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{esc(title)} ({failing} of {len(runs)} not certified)</title>"
        f"<style>{CSS}</style></head><body>"
        f"{_header(runs, stack, title, generated)}{_matrix(runs, columns(runs))}"
        f"{fleet_section(fleet, reports)}{network_section(network)}{_plots(runs)}"
        f"<section id='nodes'><h2>Nodes</h2>{nodes}</section>"
        "<footer class='meta'><p>Written by clusterforge.reports from the nodes' validators report.json "
        "(schema in validators/SCHEMA.md).</p></footer></body></html>\n"
    )
