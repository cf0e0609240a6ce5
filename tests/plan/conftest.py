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


@pytest.fixture(scope="session")
def base_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository made once per session; each test gets a copy of it (``repo``)."""
    root = tmp_path_factory.mktemp("plan-base") / "repo"
    for part in PARTS:
        shutil.copytree(REPO_ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(root, "init", "-q", "-b", "main")
    commit(root, "base")
    return root


@pytest.fixture
def repo(base_repo: Path, tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(base_repo, root, symlinks=True)  # its own working tree and history
    return root


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))
