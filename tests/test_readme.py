"""README.md stays a map: short, every repository path it names exists, every docs page linked."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 250

# What a path in backticks looks like: a folder (has a slash) or a file with one of these endings.
_FILE_ENDINGS = (".md", ".py", ".yml", ".yaml", ".json", ".sh", ".toml", ".cfg", ".j2", ".apt", ".pip")
# Made by set-up or by a run, never committed: named in the README, absent from a clone.
_GENERATED = (".venv", ".clusterforge")
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _looks_like_path(token: str) -> bool:
    if any(ch in token for ch in " <>*|$=") or token.startswith(("-", "http")):
        return False
    return "/" in token or token.endswith(_FILE_ENDINGS)


def named_paths(text: str) -> set[str]:
    """Repository paths the text names: backticked path-like tokens and relative link targets."""
    paths = {t for t in _BACKTICKED.findall(text) if _looks_like_path(t)}
    for target in _LINK.findall(text):
        target = target.split("#", 1)[0]
        if target and "://" not in target and not target.startswith("mailto:"):
            paths.add(target)
    return {p for p in paths if p.split("/", 1)[0] not in _GENERATED}


def test_readme_is_a_short_map() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; keep it a map of at most {MAX_LINES}"


def test_every_path_the_readme_names_exists() -> None:
    named = named_paths(README.read_text(encoding="utf-8"))
    assert len(named) > 30, "the parser found too few paths: has the README's format changed?"
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"README.md names paths that do not exist: {missing}"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = set(_LINK.findall(README.read_text(encoding="utf-8")))
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))
    unlinked = [p for p in pages if p not in linked]
    assert not unlinked, f"docs pages not linked from README.md: {unlinked}"


def test_the_parser_finds_paths_and_skips_commands() -> None:
    text = "`clusterforge/lock.py`, `up --stack NAME`, `inventories/<stack>/`, [x](docs/a.md#b), `.venv/bin/invoke`"
    assert named_paths(text) == {"clusterforge/lock.py", "docs/a.md"}
