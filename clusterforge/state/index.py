"""The report index: per node, its last verdict and run and which report files the state holds.

Written into ``reports/index.json`` before each state write, from the journal, so that a runner
(or a person with the bucket open) finds a node's latest reports without reading them all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clusterforge.journal import Journal, write_atomic

INDEX = "index.json"
KIND = "clusterforge-report-index"


def report_index(workdir: Path, stack: str) -> dict[str, Any]:
    journal = Journal(stack, workdir.parent)
    reports = workdir / "reports"
    nodes: dict[str, Any] = {}
    for name in sorted(journal.nodes):
        rec = journal.nodes[name]
        folder = reports / name
        files = sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
        if not (rec.verdict or files):
            continue
        entry: dict[str, Any] = {
            "verdict": rec.verdict,
            "run_id": rec.run_id,
            "certified_at": rec.certified_at,
        }
        if rec.profile:
            entry["profile"] = rec.profile
        if rec.verdict == "fail" or rec.failed_stage:
            entry["reason"] = rec.reason
        entry["files"] = [f"reports/{name}/{f}" for f in files]
        nodes[name] = entry
    top = (
        sorted(p.name for p in reports.iterdir() if p.is_file() and p.name != INDEX)
        if reports.is_dir()
        else []
    )
    return {
        "kind": KIND,
        "version": 1,
        "stack": stack,
        "reports": [f"reports/{f}" for f in top],
        "nodes": nodes,
    }


def write_report_index(workdir: Path, stack: str) -> None:
    """Refresh ``reports/index.json`` (left untouched when it would not change: no new object)."""
    if not any((workdir / name).exists() for name in ("journal.json", "journal.log", "reports")):
        return
    text = json.dumps(report_index(workdir, stack), indent=1) + "\n"
    path = workdir / "reports" / INDEX
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    write_atomic(path, text)
