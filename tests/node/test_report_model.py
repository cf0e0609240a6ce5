"""NodeReport (clusterforge/node/report_model.py) and validators/report.schema.json stay equal.

Two ways: the model's generated JSON schema and the schema file, both brought to one plain form
(properties, required keys, closed objects, types, enums, patterns, bounds), must be the same
tree; and the captured real reports, each mutated in the ways a report goes wrong, must be
accepted or refused alike by the schema file (jsonschema) and the model."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from clusterforge.node.report_model import WORKSTATION_KEYS, NodeReport, ReportError

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "validators" / "report.schema.json").read_text())
CAPTURED = sorted((ROOT / "tests" / "data" / "validators-report").rglob("*.json"))
# Words of JSON schema that only document (never constrain) a value.
_DOC = {"title", "description", "default", "$schema", "$id", "$defs"}


def _plain(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """One schema node in a form both sides can be compared in: refs resolved, ``anyOf`` of
    plain types merged, ``integer`` folded into ``number``, ``const`` as a one-value enum,
    ``prefixItems`` of one kind as ``items``, an open object's ``additionalProperties`` dropped."""
    while "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[1]]
    node = {k: v for k, v in node.items() if k not in _DOC}
    if "anyOf" in node:
        members = [_plain(m, root) for m in node.pop("anyOf")]
        types: set[str] = set()
        for m in members:
            types |= set(m.pop("type"))
        rest = [m for m in members if m]
        assert all(m == rest[0] for m in rest), f"an anyOf not of plain types: {members}"
        node.update(rest[0] if rest else {})
        node["type"] = types
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "enum" in node:
        node.pop("type", None)  # pydantic adds the enum's type; the enum alone says it
    if "type" in node:
        kinds = {node["type"]} if isinstance(node["type"], str) else set(node["type"])
        node["type"] = sorted({"number" if k == "integer" and "number" in kinds else k for k in kinds})
    if "prefixItems" in node:
        items = [_plain(m, root) for m in node.pop("prefixItems")]
        assert all(m == items[0] for m in items)
        node["items"] = items[0]
    elif "items" in node:
        node["items"] = _plain(node["items"], root)
    if "properties" in node:
        node["properties"] = {k: _plain(v, root) for k, v in node["properties"].items()}
        node["required"] = sorted(node.get("required", []))
    extra = node.get("additionalProperties")
    if extra is True or extra is None:
        node.pop("additionalProperties", None)
    elif isinstance(extra, dict):
        node["additionalProperties"] = _plain(extra, root)
    return node


def _model_schema() -> dict[str, Any]:
    raw = NodeReport.model_json_schema()
    for key in WORKSTATION_KEYS:  # the workstation's own keys, not the node's
        del raw["properties"][key]
    plain = _plain(raw, raw)

    def optional_not_null(node: dict[str, Any]) -> None:
        # pydantic writes an optional field (default None) as "X or null"; the schema file as
        # "X, not required". A required field that may be null (value, command) keeps its null.
        for name, prop in node.get("properties", {}).items():
            if name not in node["required"] and "null" in prop.get("type", []):
                prop["type"].remove("null")
            optional_not_null(prop)
        for sub in ("items", "additionalProperties"):
            if isinstance(node.get(sub), dict):
                optional_not_null(node[sub])

    optional_not_null(plain)
    return plain


def test_the_model_and_the_schema_file_say_the_same() -> None:
    assert _model_schema() == _plain(SCHEMA, SCHEMA)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(report: dict[str, Any]) -> None:
        target = report
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


_DELETE = object()
# How a report goes wrong; the schema file and the model must judge each alike.
MUTATIONS = {
    "as captured": lambda r: None,
    "schema_version 2": _set(("schema_version",), 2),
    "node empty": _set(("node",), ""),
    "profile unknown": _set(("profile",), "huge"),
    "started not UTC": _set(("started",), "2026-12-01 10:47:08"),
    "finished missing": _set(("finished",), _DELETE),
    "verdict warn": _set(("verdict",), "warn"),
    "counts negative": _set(("counts",), {"pass": -1}),
    "counts a float": _set(("counts",), {"pass": 1.5}),
    "hostname a number": _set(("hostname",), 7),
    "checks not a list": _set(("checks",), {}),
    "status unknown": _set(("checks", 0, "status"), "ok"),
    "id with capitals": _set(("checks", 0, "id"), "Gloo"),
    "summary two lines": _set(("checks", 0, "summary"), "one\ntwo"),
    "summary empty": _set(("checks", 0, "summary"), ""),
    "metric a bool": _set(("checks", 0, "metrics", "m"), {"value": True, "unit": "x"}),
    "metric null": _set(("checks", 0, "metrics", "m"), {"value": None, "unit": "x"}),
    "metric extra key": _set(("checks", 0, "metrics", "m"), {"value": 1, "unit": "x", "at": 2}),
    "threshold no unit": _set(("checks", 0, "threshold", "t"), {"value": 1}),
    "threshold a bare number": _set(("checks", 0, "threshold", "t"), 1.0),
    "evidence no lines": _set(("checks", 0, "evidence"), {"command": None}),
    "evidence command a list": _set(("checks", 0, "evidence", "command"), ["a"]),
    "evidence extra key": _set(("checks", 0, "evidence", "rc"), 0),
    "check extra key": _set(("checks", 0, "reason"), "x"),
    "check missing metrics": _set(("checks", 0, "metrics"), _DELETE),
    "duration negative": _set(("checks", 0, "duration_s"), -1),
    "series point of three": _set(
        ("checks", 0, "series"), {"b": {"x_unit": "B", "y_unit": "GB/s", "points": [[1, 2, 3]]}}
    ),
    "series good": _set(
        ("checks", 0, "series"), {"b": {"x_unit": "B", "y_unit": "GB/s", "points": [[1, 2.5]]}}
    ),
    "series no unit": _set(("checks", 0, "series"), {"b": {"y_unit": "GB/s", "points": []}}),
    "top-level extra key": _set(("extra",), {"any": "thing"}),
}


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.name)
@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_schema_file_and_the_model_judge_reports_alike(path: Path, mutation: str) -> None:
    report = copy.deepcopy(json.loads(path.read_text()))
    MUTATIONS[mutation](report)
    by_schema = jsonschema.Draft202012Validator(SCHEMA).is_valid(report)
    try:
        NodeReport.parse(report)
        by_model = True
    except ReportError:
        by_model = False
    assert by_model == by_schema, f"{mutation}: schema file says {by_schema}, model says {by_model}"
    if mutation == "as captured":
        assert by_model


def test_a_report_read_and_written_is_the_same_json(tmp_path: Path) -> None:
    for path in CAPTURED:
        report = NodeReport.read(path)
        report.run_id = "r1"  # the workstation's stamp, added at the end
        report.write(tmp_path / "report.json")
        assert json.loads((tmp_path / "report.json").read_text()) == {
            **json.loads(path.read_text()),
            "run_id": "r1",
        }


def test_a_bad_report_names_the_file_the_key_and_the_value(tmp_path: Path) -> None:
    report = json.loads((ROOT / "tests/data/validators-report/local-quick.json").read_text())
    report["checks"][1]["status"] = "ok"
    (tmp_path / "report.json").write_text(json.dumps(report))
    with pytest.raises(ReportError) as caught:
        NodeReport.read(tmp_path / "report.json")
    assert str(caught.value).startswith(f"{tmp_path / 'report.json'}: not a validators report")
    assert "checks.1.status: " in str(caught.value) and '(got "ok")' in str(caught.value)
    with pytest.raises(ReportError, match="missing"):
        NodeReport.read(tmp_path / "none.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ReportError, match="not a JSON object"):
        NodeReport.read(tmp_path / "list.json")


def test_a_malformed_report_fails_its_node_alone_with_the_key(tmp_path: Path) -> None:
    from clusterforge.node.reports import read_report

    good = tmp_path / "node-001" / "report.json"
    bad = tmp_path / "node-002" / "report.json"
    for path in (good, bad):
        path.parent.mkdir()
    good.write_text((ROOT / "tests/data/validators-report/local-quick.json").read_text())
    broken = json.loads(good.read_text())
    broken["checks"][0]["metrics"]["python_version"]["value"] = "3.11"
    bad.write_text(json.dumps(broken))
    report, verdict = read_report("node-001", good)
    assert report is not None and verdict.passed and verdict.report == str(good)
    report, verdict = read_report("node-002", bad)
    assert report is None and not verdict.passed
    check, why = verdict.first_failure
    assert check == "certify" and why.startswith("not a validators report")
    assert 'checks.0.metrics.python_version.value: Input should be a number (got "3.11")' in why
    assert not read_report("node-003", tmp_path / "none" / "report.json")[1].passed
