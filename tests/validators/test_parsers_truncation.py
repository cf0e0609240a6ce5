"""Every parser on every capture cut short at every line (and inside it), as a killed run or a partial copy
leaves it: the parser never raises, returns JSON, and does not report a cut run as finished or passing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from validators.parsers import PARSERS

DATA = Path(__file__).resolve().parents[1] / "data"


def _captures() -> list[tuple[str, Path]]:
    found = []
    for tool in sorted(PARSERS):
        for path in sorted((DATA / tool).iterdir()):
            if path.name != "SOURCES.md":
                found.append((tool, path))
    return found


CAPTURES = _captures()


def _cuts(text: str) -> Iterator[tuple[int, str]]:
    """(number of whole lines kept, text) for a cut after every line and one in the middle of every line."""
    lines = text.splitlines(keepends=True)
    kept = ""
    for index, line in enumerate(lines):
        yield index, kept + line[: len(line) // 2]
        kept += line
        yield index + 1, kept


def _first_line_with(text: str, needle: str) -> int:
    """1-based number of the first line holding `needle`; 0 if none."""
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    return 0


@pytest.mark.parametrize(("tool", "path"), CAPTURES, ids=lambda v: v.name if isinstance(v, Path) else v)
def test_cut_anywhere_never_raises(tool: str, path: Path) -> None:
    text = path.read_text()
    full: dict = PARSERS[tool](text)
    for kept, cut in _cuts(text):
        result = PARSERS[tool](cut)
        json.dumps(result)
        assert isinstance(result, dict), f"{path.name} cut after {kept} lines"
        if tool == "nccl-tests":
            rows = result["rows"]
            # a cut never invents or shifts rows: all but a half-printed last one match the full run's
            assert rows[:-1] == full["rows"][: max(len(rows) - 1, 0)], f"{path.name} cut at {kept}"
        if tool == "nccl-tests" and full["complete"]:
            footer = _first_line_with(text, "Avg bus bandwidth")
            if kept < footer:  # the footer is not there (a line cut in half counts as not there)
                assert result["complete"] is False and result["ok"] is False, f"{path.name} cut at {kept}"
        if tool == "gpu-burn" and full["complete"]:
            last_verdict = max(
                n for n, line in enumerate(text.splitlines(), start=1) if line.strip().startswith("GPU ")
            )
            if kept < last_verdict:
                assert result["complete"] is False and result["ok"] is False, f"{path.name} cut at {kept}"
        if tool == "dcgmi-diag" and path.suffix == ".json" and cut.rstrip() != text.rstrip():
            assert result["ok"] is False and result["error"], f"{path.name}: a cut JSON document cannot pass"
        if tool == "nvidia-smi-topo" and result["error"] is None:
            assert set(result["links"]) == set(result["gpus"]), f"{path.name} cut at {kept}"
