"""The parser registry: every tool of issue 3 is registered, documented, has captures, runs on 3.9 syntax."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import validators.parsers as parsers
from validators.parsers import PARSERS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TOOLS = (
    "nccl-tests", "dcgmi-diag", "nvidia-smi", "nvidia-smi-topo", "gpu-burn", "xid", "fi-info",
    "ibstat", "ibstatus", "nvlink", "nccl-net",
)  # fmt: skip


def test_every_tool_is_registered_and_documented() -> None:
    assert set(PARSERS) == set(TOOLS)
    doc = parsers.__doc__ or ""
    for tool in TOOLS:
        assert f"\n{tool}  (" in doc, f"{tool} has no section in validators/parsers/__init__.py's docstring"


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_has_captures_with_sources(tool: str) -> None:
    folder = DATA / tool
    captures = [p for p in folder.iterdir() if p.name != "SOURCES.md"]
    assert len(captures) >= 2, f"tests/data/{tool} needs at least two captured outputs"
    assert (folder / "SOURCES.md").is_file()


@pytest.mark.parametrize("tool", TOOLS)
def test_parsers_never_raise_on_foreign_input(tool: str) -> None:
    """Another tool's output, empty text and binary noise come back as a dict, not an exception."""
    for text in ("", "\x00\xff garbage {\n", (DATA / "xid" / "xid79_fallen_off_bus_line.txt").read_text()):
        json.dumps(PARSERS[tool](text))


def test_sources_use_python39_syntax_only() -> None:
    for path in sorted((ROOT / "validators" / "parsers").glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path), feature_version=(3, 9))
        for node in ast.walk(tree):
            assert not isinstance(node, getattr(ast, "Match", ())), f"{path.name}: match statement needs 3.10"
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "zip":
                assert not any(k.arg == "strict" for k in node.keywords), f"{path.name}: zip(strict=) is 3.10"
