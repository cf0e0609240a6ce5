"""The JSON Schema of the cluster spec, for editors (yaml-language-server) and CI."""

from __future__ import annotations

import json
from pathlib import Path

from clusterforge.spec.loader import REPO_ROOT
from clusterforge.spec.models import ClusterSpec

SCHEMA_PATH = REPO_ROOT / "schemas" / "cluster-spec.schema.json"
SCHEMA_ID = "https://clusterforge.invalid/schemas/cluster-spec.schema.json"


def render_schema() -> str:
    """The schema text, deterministic so the committed file can be compared byte for byte."""
    schema = ClusterSpec.model_json_schema(mode="validation")
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
    }
    schema["title"] = "clusterforge cluster spec"
    return json.dumps(schema, indent=2, sort_keys=False) + "\n"


def write_schema(path: Path = SCHEMA_PATH) -> bool:
    """Write the schema; True if the file changed."""
    text = render_schema()
    if path.exists() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return True
