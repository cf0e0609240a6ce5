"""Read validators' report.json (validators/SCHEMA.md) into a verdict and the failing checks."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def merge(a: Verdict, b: Verdict) -> Verdict:
    """Single-node and network verdicts of one node: passes only if both pass."""
    return Verdict(a.node, a.passed and b.passed, a.failing + b.failing, a.report, a.note or b.note)
