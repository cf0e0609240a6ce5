"""Read validators' report.json (validators/SCHEMA.md) into a verdict and the failing checks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.journal import write_atomic

BAD = ("fail", "error")


@dataclass(frozen=True)
class Verdict:
    node: str
    passed: bool
    failing: list[tuple[str, str]] = field(default_factory=list)  # (check id, one-line summary)
    report: str = ""  # where the report lies on the workstation
    note: str = ""

    @property
    def first_failure(self) -> tuple[str, str]:
        return self.failing[0] if self.failing else ("certify", self.note or "failed")

    def line(self) -> str:
        if self.passed:
            return "certified"
        check, summary = self.first_failure
        return f"{check}: {summary}" if summary else check


def verdict_from_report(node: str, report: dict[str, Any], path: str = "") -> Verdict:
    checks = report.get("checks") or []
    failing = [
        (str(c.get("id", "?")), " ".join(str(c.get("summary", "")).split()))
        for c in checks
        if c.get("status") in BAD
    ]
    declared = report.get("verdict")
    passed = declared == "pass" and not failing
    note = "" if passed or failing else f"report verdict {declared!r} with no failing check"
    return Verdict(node, passed, failing, path, note)


def read_verdict(node: str, path: Path) -> Verdict:
    """A missing or unreadable report is a failure with that reason (never a pass)."""
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        return Verdict(node, False, [("certify", f"no report came back ({path.name} missing)")], str(path))
    except (OSError, json.JSONDecodeError) as exc:
        return Verdict(node, False, [("certify", f"unreadable report: {exc}")], str(path))
    if not isinstance(report, dict):
        return Verdict(node, False, [("certify", "report.json is not a JSON object")], str(path))
    return verdict_from_report(node, report, str(path))


def stamp_run(path: Path, run_id: str) -> None:
    """Record in a fetched report which certification run it belongs to (key ``run_id``).

    Reports outlive runs on the workstation; only the stamp tells a report of this run from an
    earlier one. An unreadable report is left as it is (its verdict is a failure anyway)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return
    if isinstance(report, dict):
        write_atomic(path, json.dumps({**report, "run_id": run_id}, indent=2) + "\n")


def report_run_id(path: Path) -> str | None:
    """The run a report was stamped with; None when there is no readable, stamped report."""
    try:
        report = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    value = report.get("run_id") if isinstance(report, dict) else None
    return str(value) if value else None


def merge(a: Verdict, b: Verdict) -> Verdict:
    """Single-node and network verdicts of one node: passes only if both pass."""
    return Verdict(a.node, a.passed and b.passed, a.failing + b.failing, a.report, a.note or b.note)
