"""A node's network verdict as a report of validators' shape: ``network-report.json`` (pure).

The network step writes it per node next to the node's own report.json, through the same model
(clusterforge/node/report_model.py), so the people's report and every reader take both alike:
one check (the group tests' check id), the node's busbw with each partner per round as metrics,
the references it was judged against as thresholds, and one evidence line per group test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, cast

from clusterforge.certify.network.model import Reference
from clusterforge.certify.network.rounds import GroupRecord
from clusterforge.node.report_model import CheckResult, Evidence, Measure, NodeReport, Profile

UNIT = "GB/s"
PLANNER = "group tests planned by clusterforge/certify/network/planner.py"


def network_report(
    node: str,
    *,
    profile: str,
    run_id: str,
    started: str,
    finished: str,
    check: str,
    passed: bool,
    summary: str,
    records: Iterable[GroupRecord],
    references: Mapping[int, Reference],
) -> NodeReport:
    """``records``: the group tests, those of ``node`` other than scaling ones are its evidence;
    ``summary``: the verdict's one line (an empty one says the verdict instead)."""
    tests = [r for r in records if node in r.nodes and r.purpose != "scale"]
    status: Literal["pass", "fail"] = "pass" if passed else "fail"
    line = " ".join(summary.split()) or ("passed its group tests" if passed else "failed its group tests")
    entry = CheckResult(
        id=check,
        status=status,
        summary=line,
        metrics={
            f"busbw.with.{'+'.join(p for p in r.nodes if p != node)}.r{r.round}": Measure(
                value=r.figure, unit=UNIT
            )
            for r in tests
            if r.figure is not None
        },
        threshold={
            f"{k}node.reference": Measure(value=ref.value, unit=UNIT) for k, ref in references.items()
        },
        evidence=Evidence(
            command=PLANNER,
            lines=[
                f"round {r.round} {r.purpose}: {' '.join(r.nodes)}: "
                f"{'no result' if r.figure is None else f'{r.figure:g} {UNIT}'} ({r.state})"
                for r in tests
            ],
        ),
    )
    return NodeReport(
        schema_version=1,
        node=node,
        profile=cast(Profile, profile),  # the suite's name: the model refuses one it does not know
        started=started,
        finished=finished,
        verdict=status,
        checks=[entry],
        run_id=run_id,
    )
