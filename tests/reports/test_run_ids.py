"""Reports of this run only: a node's report stamped with another run shows as 'no report in this run'."""

from __future__ import annotations

import json
from pathlib import Path

from clusterforge.node.report_model import NodeReport
from clusterforge.node.reports import report_run_id
from clusterforge.reports import read_reports, write_run_html
from tests.fixtures.reports import check, report

CAPTURED = Path(__file__).resolve().parents[1] / "data" / "validators-report" / "local-quick.json"


def _write(folder: Path, name: str, run: str | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    body = report(folder.name, [check("gloo-allreduce")], **({"run_id": run} if run else {}))
    (folder / name).write_text(json.dumps(body))


def test_stamp_and_read_back(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(CAPTURED.read_text())
    assert report_run_id(report) is None
    stamped = NodeReport.read(report)
    stamped.run_id = "R2"  # as the certify stage stamps the report it read, and writes it once
    stamped.write(report)
    assert report_run_id(report) == "R2" and json.loads(report.read_text())["verdict"] == "pass"
    (tmp_path / "bad.json").write_text("{not json")
    assert report_run_id(tmp_path / "bad.json") is None


def test_an_earlier_runs_network_report_never_shows_as_this_runs(tmp_path: Path) -> None:
    _write(tmp_path / "node-001", "report.json", "R2")
    _write(tmp_path / "node-001", "network-report.json", "R2")
    _write(tmp_path / "node-002", "report.json", "R2")
    _write(tmp_path / "node-002", "network-report.json", "R1")  # died in R2: only R1's is there
    reports = read_reports(tmp_path, ["node-001", "node-002"], {"node-001": "R2", "node-002": "R2"})
    n2 = [r for r in reports if r["node"] == "node-002"]
    assert {
        "node": "node-002",
        "missing": "no report in this run R2 (the network report there is from run R1)",
    } in n2
    assert not any(r.get("kind") == "network" for r in n2)
    html = write_run_html(tmp_path, tmp_path / "report.html", stack="s", nodes=["node-001", "node-002"],
                          run_ids={"node-001": "R2", "node-002": "R2"}).read_text()  # fmt: skip
    assert "no report in this run R2" in html
    # without run ids (older callers) everything is read as before
    assert any(r.get("kind") == "network" and r["node"] == "node-002" for r in read_reports(tmp_path))


def test_the_page_shows_the_fleet_view_and_the_group_tests(tmp_path: Path) -> None:
    for node in ("node-001", "node-002", "node-003"):
        _write(tmp_path / node, "report.json", "R2")
    fleet = {
        "groups": [{"instance_type": "local", "metric": "matmul-burnin.rate", "unit": "GFLOP/s",
                    "values": {"node-001": 46.5, "node-002": 11.4, "node-003": 47.0},
                    "reference": 46.5, "reference_kind": "fleet", "warn_at": 39.5, "fail_at": 30.2}],
        "notes": ["local: baseline not used: <script>"],
    }  # fmt: skip
    data = json.loads((tmp_path / "node-002" / "report.json").read_text())
    data["fleet"] = {"metrics": [{"metric": "matmul-burnin.rate", "status": "fail"}]}
    (tmp_path / "node-002" / "report.json").write_text(json.dumps(data))
    (tmp_path / "fleet.json").write_text(json.dumps(fleet))
    groups = {"run_id": "R2", "rounds": 2, "jobs": 3, "problem": None, "links": [],
              "groups": [{"round": 1, "purpose": "screen", "nodes": ["node-001", "node-002"], "figure": 0.002,
                          "state": "done"}, {"round": 1, "purpose": "screen", "nodes": ["node-003"], "figure": None,
                          "state": "no report"}]}  # fmt: skip
    (tmp_path / "network-groups.json").write_text(json.dumps(groups))
    run_ids = dict.fromkeys(("node-001", "node-002", "node-003"), "R2")
    html = write_run_html(tmp_path, tmp_path / "r.html", stack="s", run_ids=run_ids).read_text()
    assert "<section id='fleet'>" in html and "matmul-burnin.rate" in html
    assert "<title>node-002: 11.4 (fail)</title>" in html  # the outlier marked
    assert "&lt;script&gt;" in html and "<script>" not in html
    assert "<section id='network'>" in html and "node-001 + node-002" in html and "no result" in html
    other = write_run_html(tmp_path, tmp_path / "o.html", stack="s", run_ids=dict.fromkeys(run_ids, "R3"))
    assert "<section id='network'>" not in other.read_text()  # another run's group tests are not shown


def test_a_malformed_report_shows_as_no_report_naming_its_key_and_hides_no_other(tmp_path: Path) -> None:
    _write(tmp_path / "node-001", "report.json", "R2")
    bad = report("node-002", [check("gloo-allreduce")], run_id="R2")
    bad["checks"][0]["status"] = "great"  # not a status the schema knows
    (tmp_path / "node-002").mkdir()
    (tmp_path / "node-002" / "report.json").write_text(json.dumps(bad))
    reports = {r["node"]: r for r in read_reports(tmp_path, ["node-001", "node-002"])}
    assert "missing" not in reports["node-001"] and reports["node-001"]["verdict"] == "pass"
    why = reports["node-002"]["missing"]
    assert why.startswith("node-002/report.json: not a validators report") and "checks.0.status" in why, why
