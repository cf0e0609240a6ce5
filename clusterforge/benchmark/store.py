"""Benchmark results on the workstation, per run: ``<state>/<stack>/benchmarks/<run id>/``
holds ``result.json``, ``report.html`` and ``raw/<run key>/`` (every file the job wrote, as read
back: rank lines, node records, telemetry, job logs). The state folder is the stack's
(``clusterforge.journal.stack_dir``: ``$CLUSTERFORGE_STATE_DIR`` is honoured)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from clusterforge.benchmark.result import SCHEMA
from clusterforge.journal import stack_dir, write_atomic

RESULT = "result.json"
_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


class BenchmarkStore:
    def __init__(self, stack: str) -> None:
        self.dir = stack_dir(stack) / "benchmarks"

    def run_dir(self, run_id: str) -> Path:
        return self.dir / run_id

    def save(self, result: dict[str, Any]) -> Path:
        path = self.run_dir(result["run_id"]) / RESULT
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(result, indent=1) + "\n")
        return path

    def save_html(self, run_id: str, html: str) -> Path:
        path = self.run_dir(run_id) / "report.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, html)
        return path

    def save_raw(self, run_id: str, key: str, files: dict[str, str]) -> Path:
        folder = self.run_dir(run_id) / "raw" / key
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            if _SAFE.match(name):  # names come from the nodes: never a path
                (folder / name).write_text(text)
        return folder

    def runs(self) -> list[str]:
        if not self.dir.is_dir():
            return []
        return sorted((p.name for p in self.dir.iterdir() if (p / RESULT).is_file()), reverse=True)

    def load(self, run_id: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.run_dir(run_id) / RESULT).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None

    def previous(self, comparable: str, before: str) -> dict[str, Any] | None:
        """The newest stored run older than ``before`` with the same comparable key."""
        for run_id in self.runs():
            if run_id >= before:
                continue
            data = self.load(run_id)
            if data is not None and data.get("comparable") == comparable:
                return data
        return None
