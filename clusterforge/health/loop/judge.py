"""A finished health job's outcome, judged by the project's own judges (the I/O: reading its files).

The job's folder on shared storage holds ``rc`` (the validators' exit status, written by the job's
script) and ``report.json``. No ``rc``: the job never finished by itself (preempted by a user job,
cancelled, its node lost) -> ``interrupted``, retried later and never a failure. ``rc`` of a signal
(128 + n) is the same. Otherwise the node-side verdict (``node.reports.read_report``: a missing or
malformed report fails, never passes) and the fleet judge over every report of the round, against the
copied baseline (``certify.fleet.judge.judge_run``): the node passes only if both pass, and the reason
is the first failing check's ``clusterforge: <check>: <evidence>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from clusterforge.certify.fleet.baseline import BaselineError, BaselineStore
from clusterforge.certify.fleet.judge import judge_run
from clusterforge.health.loop.slurm import RC_FILE
from clusterforge.node.report_model import NodeReport
from clusterforge.node.reports import read_report
from clusterforge.slurm.admission import failure_reason

Result = Literal["pass", "fail", "interrupted"]


@dataclass(frozen=True)
class Outcome:
    node: str
    result: Result
    at: str  # ISO time the job finished (its rc file), so recording it twice writes the same strike
    reason: str = ""  # clusterforge: <check>: <evidence> on fail; what happened otherwise
    check: str = ""


def _finished_at(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat()


def read_outcomes(
    finished: Mapping[str, Path],
    types: Mapping[str, str],
    store: BaselineStore | None,
    fleet: Mapping[str, Any],
) -> dict[str, Outcome]:
    """``finished``: node -> its job's folder. One fleet judgement over every report read."""
    out: dict[str, Outcome] = {}
    reports: dict[str, NodeReport] = {}
    for node, folder in finished.items():
        rc_path = folder / RC_FILE
        try:
            rc = int(rc_path.read_text().strip() or "-1")
        except (OSError, ValueError):
            out[node] = Outcome(
                node, "interrupted", "", "the job left no exit status (preempted or cancelled)"
            )
            continue
        at = _finished_at(rc_path)
        if rc >= 128:
            out[node] = Outcome(node, "interrupted", at, f"the validators were killed (signal {rc - 128})")
            continue
        report, verdict = read_report(node, folder / "report.json")
        if not verdict.passed:
            check, line = verdict.first_failure
            out[node] = Outcome(node, "fail", at, failure_reason(check, line), check)
            continue
        if report is not None:
            reports[node] = report
        out[node] = Outcome(node, "pass", at)
    if reports:
        try:
            judgement = judge_run(
                {n: r.to_json() for n, r in reports.items()},
                {n: types.get(n, "") for n in reports},
                baselines=store,
                overrides=fleet.get("overrides") or {},
                versions=fleet.get("versions") or {},
                across_versions=fleet.get("across_versions") or {},
                shares=fleet.get("shares") or {},
            )
        except BaselineError as exc:  # an unusable store is named, and the node-side verdicts stand
            judgement = None
            for node in reports:
                out[node] = Outcome(node, "pass", out[node].at, f"fleet judging not done: {exc}")
        for node, fleet_verdict in judgement.nodes.items() if judgement else []:
            if node in out and not fleet_verdict.passed:
                check, line = fleet_verdict.failing[0]
                out[node] = Outcome(node, "fail", out[node].at, failure_reason(check, line), check)
    return out
