"""The loop's step log: one JSON line per step, appended to ``<stack dir>/health-loop.jsonl``.

Kept out of the journal's sections on purpose: a section is held in memory and copied on every append
and into every snapshot, and a loop that runs every five minutes writes about two lines per node
checked. The file is appended and flushed line by line (a killed round leaves every step it took) and
rolled over to ``.1`` past ``MAX_BYTES``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

LOG_FILE = "health-loop.jsonl"
MAX_BYTES = 64 << 20


class StepLog:
    def __init__(self, path: Path, max_bytes: int = MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self._handle: Any = None

    def write(self, entry: dict[str, Any]) -> None:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists() and self.path.stat().st_size > self.max_bytes:
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
            self._handle = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  closed by close()
        self._handle.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def read_steps(path: Path) -> list[dict[str, Any]]:
    """Every readable line of the log (a torn last line is skipped)."""
    out = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out
