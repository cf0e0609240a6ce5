"""Fleet judging inside the certify stage: this command's reports -> judge -> verdicts -> baseline.

The judge itself is pure (clusterforge/certify/fleet/judge.py); this module does its I/O. The fleet of
a command is every node it certifies: a batch is judged together with the nodes certified in
earlier batches of the same command, then against the stored baseline, then the floor. The
figures of nodes that pass everything (node-side checks, fleet, network) enter the baseline.

What lands on disk, per run:
- each node's ``report.json`` (the workstation copy) gets a ``fleet`` object: its figures, the
  reference that judged each and the verdict; ``junit.xml`` gets a ``clusterforge.fleet`` suite;
- ``reports/fleet.json``: every metric's values over the command's nodes with the reference and
  the warn/fail band, for the people's report.

Fail closed: a judge that cannot run fails the batch's nodes with that reason (never a pass).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.certify.fleet.baseline import BaselineError, BaselineStore
from clusterforge.certify.fleet.inputs import FleetInputs, fleet_inputs
from clusterforge.certify.fleet.judge import FleetJudgement, NodeFleetVerdict, judge_run
from clusterforge.certify.fleet.record import record_run
from clusterforge.journal import write_atomic
from clusterforge.node.report_model import NodeReport
from clusterforge.node.reports import Verdict, merge
from clusterforge.spec.models import ClusterSpec

CHECK_ID = "fleet-judging"
FLEET_FILE = "fleet.json"


@dataclass
class FleetContext:
    """What one command's fleet judging keeps between batches."""

    stack: str
    reports_dir: Path
    store: BaselineStore
    inputs: FleetInputs | None
    error: str = ""  # why the inputs could not be built (then every node fails closed)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> report of this command
    types: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # shown to people: unusable baselines, records

    @classmethod
    def for_stack(cls, spec: ClusterSpec, profile: str | None, reports_dir: Path) -> FleetContext:
        try:
            inputs, error = fleet_inputs(spec, profile), ""
        except Exception as exc:  # noqa: BLE001 - a bad catalogue or profile must not crash certification
            inputs, error = None, f"{type(exc).__name__}: {exc}"
        return cls(spec.stack, reports_dir, BaselineStore(spec.stack), inputs, error)


def judge(
    fc: FleetContext, types: Mapping[str, str], reports: Mapping[str, NodeReport]
) -> FleetJudgement | None:
    """Judge the batch (``types``: node -> instance type; ``reports``: this run's readable
    reports of the batch, as the certify stage read them) with the command's earlier nodes; None
    when the judge could not run (``fc.error`` says why). Each judged report gets its ``fleet``
    verdicts (the caller writes it) and its junit.xml a ``clusterforge.fleet`` suite."""
    for node, kind in types.items():
        if node in reports:
            fc.reports[node], fc.types[node] = reports[node].to_json(), kind
    if fc.inputs is None:
        return None
    try:
        judgement = judge_run(
            fc.reports,
            fc.types,
            baselines=fc.store,
            overrides=fc.inputs.overrides,
            versions=fc.inputs.versions,
            across_versions=fc.inputs.across_versions,
            shares=fc.inputs.shares,
        )
    except Exception as exc:  # noqa: BLE001 - fail closed, with the reason
        fc.error = f"{type(exc).__name__}: {exc}"
        return None
    fc.notes = list(judgement.notes)
    for node in types:
        if node in judgement.nodes:
            if node in reports:
                reports[node].fleet = _node_json(judgement.nodes[node])
            _annotate_junit(fc.reports_dir / node, judgement.nodes[node])
    _write_fleet_file(fc, judgement)
    return judgement


def apply(
    judgement: FleetJudgement | None,
    verdicts: Mapping[str, Verdict],
    note: Callable[[str, str], None],
    error: str = "",
) -> dict[str, Verdict]:
    """The batch's verdicts with the fleet's failures added (node-side failures stay first)."""
    out = dict(verdicts)
    for node, verdict in verdicts.items():
        if judgement is None:
            why = f"the fleet judge could not run ({error or 'no inputs'}); not certified"
            out[node] = merge(verdict, Verdict(node, False, [(CHECK_ID, why)]))
            continue
        fv = judgement.nodes.get(node)
        if fv is None:
            continue  # no readable report of this run: the node-side verdict already fails it
        for line in fv.warnings:
            note(node, f"fleet warning: {line}")
        for line in fv.notes:  # e.g. a baseline of another share, not a reference
            note(node, f"fleet: {line.removeprefix(f'{fv.instance_type}: ')}")
        if not fv.passed:
            out[node] = merge(verdict, Verdict(node, False, fv.failing))
    return out


def record(
    fc: FleetContext, judgement: FleetJudgement | None, passed: Mapping[str, bool], run_id: str
) -> None:
    """Add the figures of the batch's nodes that passed everything to the stored baseline."""
    if judgement is None or fc.inputs is None:
        return
    keep = {n: v for n, v in judgement.nodes.items() if passed.get(n)}
    if not keep:
        return
    try:
        written = record_run(
            fc.store,
            FleetJudgement(keep, judgement.groups, judgement.notes),
            run_id=run_id,
            versions=fc.inputs.versions,
            shares=fc.inputs.shares,
        )
    except (BaselineError, OSError) as exc:
        fc.notes.append(f"baseline not updated: {exc}")
        return
    for kind, path in written.items():
        fc.notes.append(f"{kind}: baseline updated ({path})")


# -- what lands on disk -----------------------------------------------------------------------


def _node_json(fv: NodeFleetVerdict) -> dict[str, Any]:
    return {
        "passed": fv.passed,
        "instance_type": fv.instance_type,
        "metrics": [asdict(m) for m in fv.metrics],
        "notes": list(fv.notes),
    }


def _annotate_junit(folder: Path, fv: NodeFleetVerdict) -> None:
    """The fleet verdicts into the node's junit.xml (a ``clusterforge.fleet`` suite)."""
    junit = folder / "junit.xml"
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return
    for old in root.findall("testsuite[@name='clusterforge.fleet']"):
        root.remove(old)
    suite = ET.SubElement(root, "testsuite", name="clusterforge.fleet")
    failures = 0
    for m in fv.metrics:
        case = ET.SubElement(suite, "testcase", classname=f"fleet.{fv.node}", name=m.metric)
        if m.status == "fail":
            failures += 1
            ET.SubElement(case, "failure", message=m.line).text = m.note or m.line
        elif m.status == "unjudged":
            ET.SubElement(case, "skipped", message=m.line)
        else:
            ET.SubElement(case, "system-out").text = m.line
    suite.set("tests", str(len(fv.metrics)))
    suite.set("failures", str(failures))
    write_atomic(junit, ET.tostring(root, encoding="unicode") + "\n")


def _write_fleet_file(fc: FleetContext, judgement: FleetJudgement) -> None:
    groups = []
    for g in judgement.groups:
        row = asdict(g)
        row["rules"] = asdict(g.rules) if hasattr(g.rules, "__dataclass_fields__") else str(g.rules)
        groups.append(row)
    data = {"stack": fc.stack, "nodes": sorted(judgement.nodes), "groups": groups, "notes": judgement.notes}
    write_atomic(fc.reports_dir / FLEET_FILE, json.dumps(data, indent=2, default=str) + "\n")
