"""The committed JSON Schema is current, and it accepts the example stacks editors open."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from clusterforge.spec.schema import SCHEMA_PATH, render_schema

ROOT = Path(__file__).resolve().parents[2]
STACKS = ("local", "dev", "prod")


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_committed_schema_is_up_to_date() -> None:
    assert SCHEMA_PATH.read_text() == render_schema(), "run `invoke spec.schema` and commit the result"


@pytest.mark.parametrize("stack", STACKS)
def test_schema_accepts_example_stack(validator: jsonschema.Draft202012Validator, stack: str) -> None:
    data = yaml.safe_load((ROOT / "stacks" / f"{stack}.yaml").read_text())
    errors = [e.message for e in validator.iter_errors(data)]
    assert errors == []


@pytest.mark.parametrize("stack", STACKS)
def test_example_stack_points_editors_at_the_schema(stack: str) -> None:
    first = (ROOT / "stacks" / f"{stack}.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schemas/cluster-spec.schema.json"


def test_schema_rejects_unknown_key_and_bad_enum(validator: jsonschema.Draft202012Validator) -> None:
    data = yaml.safe_load((ROOT / "stacks" / "prod.yaml").read_text())
    data["node_pools"][1]["colour"] = "red"
    data["software"]["os_image"] = "windows-11"
    messages = sorted(e.message for e in validator.iter_errors(data))
    assert any("'colour' was unexpected" in m for m in messages)
    assert any("'windows-11'" in m for m in messages)
