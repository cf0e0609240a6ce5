"""One node's report.json as a typed model (validators/report.schema.json, validators/SCHEMA.md).

The workstation reads a node's report through ``NodeReport.read`` and writes it through
``NodeReport.write`` only: the certify stage, the fleet annotation and the network step's
``network-report.json`` share one shape. The model follows the schema file exactly (fields,
types, enums, required keys; tests/node/test_report_model.py holds them equal) and adds the keys
the workstation writes itself (``WORKSTATION_KEYS``). Top-level keys it does not know are kept as
they are (the schema allows them), so a read-and-write loses nothing.

A bad report is a ``ReportError`` naming the file, the key and the bad value; callers turn it into
that node's failure, never into a stop of the whole run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from clusterforge.journal import write_atomic

SCHEMA_VERSION = 1
# Keys the workstation adds to a fetched report (not the node's: absent from the schema file).
WORKSTATION_KEYS = ("run_id", "fleet")

Status = Literal["pass", "fail", "warn", "skip", "error"]
Profile = Literal["quick", "standard", "full"]
BAD_STATUSES: tuple[Status, ...] = ("fail", "error")
# JSON "number": an int stays an int when written back (1, not 1.0); a bool is not a number.
Number = StrictInt | StrictFloat
# The constraint on each member: pydantic writes one on a whole union into no JSON schema keyword.
NonNegative = Annotated[StrictInt, Field(ge=0)] | Annotated[StrictFloat, Field(ge=0)]
Timestamp = Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")]


class ReportError(ValueError):
    """A report.json that is missing, unreadable or not of the schema; says file, key and value."""


class Measure(BaseModel):
    """A metric or a threshold: ``{"value": number|null, "unit": str}``."""

    model_config = ConfigDict(extra="forbid")

    value: Number | None
    unit: str


class Evidence(BaseModel):
    model_config = ConfigDict(extra="allow")

    command: str | None
    lines: list[str]


class Series(BaseModel):
    """A measured curve (e.g. busbw against message size), never judged."""

    model_config = ConfigDict(extra="allow")

    x_unit: str
    y_unit: str
    points: list[tuple[Number, Number]]


class CheckResult(BaseModel):
    """One check's entry of ``checks``."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")]
    status: Status
    summary: Annotated[str, Field(min_length=1, pattern=r"^[^\n]*$")]
    metrics: dict[str, Measure]
    threshold: dict[str, Measure]
    evidence: Evidence
    duration_s: NonNegative | None = None
    series: dict[str, Series] | None = None

    @property
    def bad(self) -> bool:
        return self.status in BAD_STATUSES


class NodeReport(BaseModel):
    """A node's report.json (schema_version 1) with the workstation's own keys."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    schema_version: Literal[1]
    node: Annotated[str, Field(min_length=1)]
    profile: Profile
    started: Timestamp
    finished: Timestamp
    verdict: Literal["pass", "fail"]
    counts: dict[str, Annotated[StrictInt, Field(ge=0)]] | None = None
    instance_type: str | None = None
    hostname: str | None = None
    suite_version: str | None = None
    config: str | None = None
    checks: list[CheckResult]
    # The workstation's keys: the certification run the report belongs to, the fleet's verdicts.
    run_id: str | None = None
    fleet: dict[str, Any] | None = None

    @classmethod
    def parse(cls, data: Any, source: str = "report.json") -> NodeReport:
        """A report from decoded JSON; ``source`` names it in the error."""
        if not isinstance(data, dict):
            raise ReportError(f"{source}: not a JSON object (got {type(data).__name__})")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ReportError(_describe(source, exc)) from None

    @classmethod
    def read(cls, path: Path) -> NodeReport:
        """Read and check ``path``; ReportError (file, key, bad value) when it is not a report."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise ReportError(f"{path}: no report came back ({path.name} missing)") from None
        except OSError as exc:
            raise ReportError(f"{path}: unreadable report: {exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ReportError(f"{path}: unreadable report: {exc}") from None
        return cls.parse(data, str(path))

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data: keys that were never given stay absent (null ones stay null)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def write(self, path: Path) -> None:
        """Write atomically (a crash leaves the old file or the new one, clusterforge/journal.py)."""
        write_atomic(path, json.dumps(self.to_json(), indent=2) + "\n")

    @property
    def failing(self) -> list[CheckResult]:
        return [c for c in self.checks if c.bad]

    def check(self, check_id: str) -> list[CheckResult]:
        return [c for c in self.checks if c.id == check_id]


def utc_stamp() -> str:
    """Now as the report's timestamps are written (``2026-12-01T10:47:08Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _describe(source: str, exc: ValidationError) -> str:
    """The first few problems, each as ``key: what is wrong (got value)``, and where the shape is."""
    found: dict[str, str] = {}
    for err in exc.errors():
        # A union (a number: int or float) reports once per member: one line per key is enough.
        loc = [str(p) for p in err["loc"] if p not in _UNION_MEMBERS]
        key = ".".join(loc) or "(top level)"
        msg = "Input should be a number" if err["type"] in ("int_type", "float_type") else err["msg"]
        got = "" if err["type"] == "missing" else f" (got {_short(err.get('input'))})"
        found.setdefault(key, f"{key}: {msg}{got}")
    lines = list(found.values())
    more = f"; +{len(lines) - 3} more" if len(lines) > 3 else ""
    return (
        f"{source}: not a validators report (validators/report.schema.json): " + "; ".join(lines[:3]) + more
    )


_UNION_MEMBERS = ("int", "float", "none", "constrained-int", "constrained-float")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."
