"""Read validators' report.json (validators/SCHEMA.md) into a verdict and the failing checks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from clusterforge.node.report_model import NodeReport, ReportError


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


def verdict_of(node: str, report: NodeReport, path: str = "") -> Verdict:
    """The node's verdict: its report's, failed by any failing check (never a pass without one)."""
    failing = [(c.id, " ".join(c.summary.split())) for c in report.failing]
    passed = report.verdict == "pass" and not failing
    note = "" if passed or failing else f"report verdict {report.verdict!r} with no failing check"
    return Verdict(node, passed, failing, path, note)


def read_report(node: str, path: Path) -> tuple[NodeReport | None, Verdict]:
    """The node's report and its verdict. A missing, unreadable or malformed report is a failure
    with that reason (never a pass) and no report."""
    try:
        report = NodeReport.read(path)
    except ReportError as exc:
        return None, Verdict(node, False, [("certify", str(exc).removeprefix(f"{path}: "))], str(path))
    return report, verdict_of(node, report, str(path))


def read_verdict(node: str, path: Path) -> Verdict:
    """A missing or unreadable report is a failure with that reason (never a pass)."""
    return read_report(node, path)[1]


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
