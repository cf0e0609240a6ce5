"""The certify stage reads each node's report.json once and writes it once, through NodeReport,
and the network step's network-report.json is a validators report too (validators/report.schema.json)."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from clusterforge.journal import Journal
from clusterforge.node.report_model import NodeReport
from clusterforge.pipeline.context import Options
from clusterforge.pipeline.up import up

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "validators" / "report.schema.json").read_text())


@pytest.mark.slow  # `up` over the stand-in playbooks: ansible-runner, as test_up.py
def test_each_report_is_read_once_and_written_once(world: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    reads: Counter[str] = Counter()
    writes: Counter[str] = Counter()
    read, write = NodeReport.read, NodeReport.write

    def counted_read(cls: type[NodeReport], path: Path) -> NodeReport:
        reads[f"{path.parent.name}/{path.name}"] += 1
        return read(path)

    def counted_write(self: NodeReport, path: Path) -> None:
        writes[f"{path.parent.name}/{path.name}"] += 1
        write(self, path)

    monkeypatch.setattr(NodeReport, "read", classmethod(counted_read))
    monkeypatch.setattr(NodeReport, "write", counted_write)
    monkeypatch.setenv("CF_TEST_FAIL_CERT", "node-003")
    outcome = up(world["spec"], Options(), console=Console(file=io.StringIO()), seams=world["seams"])
    assert outcome.failed == ["node-003"]
    nodes = ("node-001", "node-002", "node-003")
    assert reads == Counter({f"{n}/report.json": 1 for n in nodes})
    assert writes == Counter(
        {
            **{f"{n}/report.json": 1 for n in nodes},
            "node-001/network-report.json": 1,
            "node-002/network-report.json": 1,
        }
    )
    journal = Journal(world["spec"].stack)
    for name in ("node-001", "node-002"):
        folder = Path(journal.record(name).report).parent
        for file in ("report.json", "network-report.json"):
            data = json.loads((folder / file).read_text())
            jsonschema.Draft202012Validator(SCHEMA).validate(data)
            assert data["run_id"]
        assert "fleet" in json.loads((folder / "report.json").read_text())
