"""network-report.json (clusterforge/certify/network/report.py): the network verdict in the shape
of validators/report.schema.json, read back by the same model as a node's own report."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from clusterforge.certify.network.model import Reference
from clusterforge.certify.network.report import network_report
from clusterforge.certify.network.rounds import GroupRecord
from clusterforge.node.report_model import NodeReport

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "validators" / "report.schema.json").read_text())
RECORDS = [
    GroupRecord(1, "screen", ["node-001", "node-002"], 0.117, "done"),
    GroupRecord(1, "screen", ["node-003"], None, "no report: srun: error: Nodes required are DOWN"),
    GroupRecord(2, "retest", ["node-002", "node-003"], None, "cancelled at the deadline"),
    GroupRecord(3, "scale", ["node-001", "node-002", "node-003"], 0.09, "done"),
]


def _report(node: str, passed: bool, summary: str) -> NodeReport:
    return network_report(
        node,
        profile="quick",
        run_id="R1",
        started="2026-12-01T10:00:00Z",
        finished="2026-12-01T10:05:00Z",
        check="gloo-allreduce",
        passed=passed,
        summary=summary,
        records=RECORDS,
        references={2: Reference(2, 0.11, "baseline")},
    )


def test_a_network_report_is_a_validators_report_and_reads_back(tmp_path: Path) -> None:
    report = _report("node-002", False, "gloo-allreduce: 0.117 GB/s with node-001,\n no result with node-003")
    report.write(tmp_path / "network-report.json")
    data = json.loads((tmp_path / "network-report.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(data)
    assert NodeReport.read(tmp_path / "network-report.json") == report
    check = data["checks"][0]
    assert data["verdict"] == "fail" and data["run_id"] == "R1" and check["status"] == "fail"
    assert check["summary"] == "gloo-allreduce: 0.117 GB/s with node-001, no result with node-003"
    assert check["metrics"] == {"busbw.with.node-001.r1": {"value": 0.117, "unit": "GB/s"}}
    assert check["threshold"] == {"2node.reference": {"value": 0.11, "unit": "GB/s"}}
    assert check["evidence"]["lines"] == [
        "round 1 screen: node-001 node-002: 0.117 GB/s (done)",
        "round 2 retest: node-002 node-003: no result (cancelled at the deadline)",
    ]  # the scaling round is for the people's report, not the node's verdict


def test_a_pass_without_a_note_still_has_a_summary() -> None:
    data = _report("node-001", True, "").to_json()
    jsonschema.Draft202012Validator(SCHEMA).validate(data)
    assert data["verdict"] == "pass" and data["checks"][0]["summary"] == "passed its group tests"
