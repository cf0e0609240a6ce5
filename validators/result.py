"""A check's result: what report.json records per check (schema in SCHEMA.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

STATUSES = ("pass", "fail", "warn", "skip", "error")

Number = Union[int, float]


@dataclass
class CheckResult:
    id: str
    status: str
    summary: str
    metrics: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    threshold: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    evidence: Dict[str, Any] = field(default_factory=lambda: {"command": None, "lines": []})
    duration_s: float = 0.0
    series: Dict[str, Dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {
            "id": self.id,
            "status": self.status,
            "summary": self.summary,
            "metrics": self.metrics,
            "threshold": self.threshold,
            "evidence": self.evidence,
            "duration_s": round(self.duration_s, 3),
        }
        if self.series:  # optional: only checks that measure a curve (nccl busbw vs size)
            data["series"] = self.series
        return data


class Outcome:
    """Builder a check fills while it runs; ``finish`` picks the status.

    Failures win over warnings; a check with neither passes with ``ok_summary``.
    """

    def __init__(self, check_id: str) -> None:
        self.check_id = check_id
        self.failures: List[str] = []
        self.warnings: List[str] = []
        self.metrics: Dict[str, Dict[str, Any]] = {}
        self.threshold: Dict[str, Dict[str, Any]] = {}
        self.commands: List[str] = []
        self.curves: Dict[str, Dict[str, Any]] = {}
        self.lines: List[str] = []

    def fail(self, reason: str) -> None:
        self.failures.append(reason)

    def warn(self, reason: str) -> None:
        self.warnings.append(reason)

    def metric(self, name: str, value: Optional[Number], unit: str) -> None:
        self.metrics[name] = {"value": value, "unit": unit}

    def limit(self, key: str, value: Optional[Number], unit: str) -> None:
        self.threshold[key] = {"value": value, "unit": unit}

    def series(self, name: str, points: List[List[Number]], x_unit: str, y_unit: str) -> None:
        """A measured curve, e.g. busbw (y) against message size (x), for the report's plots."""
        self.curves[name] = {"x_unit": x_unit, "y_unit": y_unit, "points": points}

    def command(self, argv: Union[str, Sequence[str]]) -> None:
        self.commands.append(argv if isinstance(argv, str) else " ".join(argv))

    def evidence(self, *lines: str, limit: int = 40) -> None:
        for line in lines:
            if len(self.lines) < limit:
                self.lines.append(line.rstrip()[:400])

    def finish(self, ok_summary: str) -> CheckResult:
        if self.failures:
            status, summary = "fail", _join(self.failures)
        elif self.warnings:
            status, summary = "warn", _join(self.warnings)
        else:
            status, summary = "pass", ok_summary
        evidence = {"command": "; ".join(self.commands) if self.commands else None, "lines": self.lines}
        if self.failures and self.warnings:
            evidence["warnings"] = list(self.warnings)
        return CheckResult(
            self.check_id, status, summary, self.metrics, self.threshold, evidence, series=self.curves
        )


def _join(reasons: List[str]) -> str:
    """One line: the first reason, and how many more there are (all are in evidence)."""
    first = reasons[0].replace("\n", " ")
    return first if len(reasons) == 1 else f"{first} (+{len(reasons) - 1} more: {'; '.join(reasons[1:])})"


def skipped(check_id: str, reason: str) -> CheckResult:
    return CheckResult(check_id, "skip", reason)
