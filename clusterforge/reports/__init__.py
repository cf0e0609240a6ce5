"""The human report of a certification run: HTML pages (tables, inline SVG plots, no scripts).

    from clusterforge.reports import render_run_html, write_run_html
    html = render_run_html(report_dicts, stack="dev")
    write_run_html(Path(".clusterforge/dev/reports"), Path(".clusterforge/dev/reports/report.html"))

``write_run_html`` reads the pipeline's layout: ``<reports_dir>/<node>/report.json`` (single-node
checks) and ``<reports_dir>/<node>/network-report.json`` (the multi-node check). A node folder
without a readable report.json, or an expected node with no folder, shows as "no report". Up to
64 nodes the report is one page; above, the page is the run's summary and each node's detail is
on the node pages beside it (``report-nodes/001.html``, ...; html.py says why).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from clusterforge.journal import write_atomic
from clusterforge.node.report_model import NodeReport, ReportError
from clusterforge.reports.html import PAGES_DIR_SUFFIX, render_run_html, render_run_pages
from clusterforge.reports.summary import KIND_NETWORK, KIND_SINGLE

REPORT_FILES = {"report.json": KIND_SINGLE, "network-report.json": KIND_NETWORK}

__all__ = ["read_reports", "render_run_html", "render_run_pages", "write_run_html"]


def _load(path: Path, node: str, kind: str) -> dict[str, Any]:
    """The report dict, or a ``missing`` entry saying why it cannot be read."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {"node": node, "missing": f"{path.name}: unreadable ({exc})"}
    if not isinstance(data, dict):
        return {"node": node, "missing": f"{path.name}: not a JSON object"}
    try:  # the one typed report (node/report_model.py): a malformed one is named, key and value
        data = NodeReport.parse(data, f"{node}/{path.name}").to_json()
    except ReportError as exc:
        return {"node": node, "missing": str(exc)}
    # The folder names the node (the pipeline fetched it there); a report naming another node is kept
    # under the folder's name so it cannot hide the node it was fetched for.
    if data.get("node") != node:
        data = {**data, "node": node, "reported_node": data.get("node")}
    return {**data, "kind": kind}


def read_reports(
    reports_dir: Path, nodes: Iterable[str] | None = None, run_ids: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every ``*/report.json`` and ``*/network-report.json`` under ``reports_dir``; ``nodes``
    (when given) are the nodes the run was meant to certify: any without a report is listed missing.
    ``run_ids`` (node -> run id): a node's report stamped with another run (or none) is not its
    report in this run and shows as "no report in this run", never as that earlier result."""
    out = [
        _of_run(report, run_ids) if run_ids is not None else report
        for report in _read_all(reports_dir, nodes)
    ]
    return out


def _of_run(report: dict[str, Any], run_ids: Mapping[str, str]) -> dict[str, Any]:
    node = str(report.get("node"))
    want = run_ids.get(node)
    if want is None or "missing" in report or report.get("run_id") == want:
        return report
    found = report.get("run_id")
    earlier = f" (the {report.get('kind', 'single')} report there is from run {found})" if found else ""
    return {"node": node, "missing": f"no report in this run {want}{earlier}"}


def _read_all(reports_dir: Path, nodes: Iterable[str] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    folders = sorted(p for p in reports_dir.iterdir() if p.is_dir()) if reports_dir.is_dir() else []
    seen = set()
    for folder in folders:
        found = [(folder / name, kind) for name, kind in REPORT_FILES.items() if (folder / name).is_file()]
        if not found and nodes is None:
            continue  # a stray folder (not a node) when we do not know the node list
        seen.add(folder.name)
        if not (folder / "report.json").is_file():
            out.append({"node": folder.name, "missing": f"no report.json in {folder}"})
        out.extend(_load(path, folder.name, kind) for path, kind in found)
    for node in nodes or ():
        if node not in seen:
            out.append({"node": node, "missing": f"no report folder {reports_dir / node}"})
    return out


def write_run_html(
    reports_dir: Path,
    out: Path,
    *,
    stack: str | None = None,
    title: str | None = None,
    nodes: Iterable[str] | None = None,
    run_ids: Mapping[str, str] | None = None,
    history: Mapping[str, str] | None = None,
) -> Path:
    """Render the reports under ``reports_dir`` to ``out`` (atomically); returns ``out``.
    ``stack`` defaults to the folder above reports_dir (``.clusterforge/<stack>/reports``);
    ``history``: node -> its incident line (render_run_pages)."""
    reports_dir, out = Path(reports_dir), Path(out)
    reports = read_reports(reports_dir, nodes, run_ids)
    name = stack or reports_dir.resolve().parent.name
    fleet, network = _side(reports_dir / "fleet.json"), _side(reports_dir / "network-groups.json")
    if run_ids is not None and network is not None and network.get("run_id") not in set(run_ids.values()):
        network = None  # another run's group tests
    pages = render_run_pages(
        reports, stack=name, title=title, fleet=fleet, network=network, page_name=out.name, history=history
    )
    folder = out.parent / (out.stem + PAGES_DIR_SUFFIX)
    for stale in folder.glob("*.html") if folder.is_dir() else ():
        if f"{folder.name}/{stale.name}" not in pages:
            stale.unlink()  # an earlier, larger run's pages
    for name, html in pages.items():
        write_atomic(out.parent / name if name else out, html)
    return out


def _side(path: Path) -> dict[str, Any] | None:
    """A run-level file beside the node folders (fleet.json, network-groups.json), or None."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None
