"""A throw-away git repository holding this tree's roles, playbooks, catalogues and specs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from clusterforge.spec.loader import REPO_ROOT

PARTS = ("roles", "playbooks", "clusterforge/data", "validators", "stacks")


def git(root: Path, *argv: str) -> str:
    env_args = ["-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"]
    proc = subprocess.run(["git", *env_args, *argv], cwd=root, capture_output=True, text=True, check=True)
    return proc.stdout


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for part in PARTS:
        shutil.copytree(REPO_ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(root, "init", "-q", "-b", "main")
    commit(root, "base")
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))
