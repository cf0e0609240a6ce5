"""`invoke plan` at 1,000 nodes: a line per group of nodes with the same change, a markdown that
fits a GitHub comment, every node in the JSON (issue 24)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterforge.plan.impact import NodeImpact
from clusterforge.plan.render import MARKDOWN_LIMIT, Plan, group_changes, markdown
from tests.plan.conftest import commit, edit
from tests.plan.test_sources import _run_task


@pytest.fixture
def big(repo: Path) -> Path:
    spec = repo / "stacks" / "local.yaml"
    edit(spec, "count: 4", "count: 1000")
    edit(spec, "network_cidr: 10.89.42.0/24", "network_cidr: 10.89.32.0/20")
    commit(repo, "1,000 nodes")
    edit(spec, "slurm: 22.05.8", "slurm: 22.05.9")  # one version bump in the working tree
    return repo


@pytest.mark.slow
def test_a_version_bump_on_a_thousand_nodes_is_a_few_lines(
    monkeypatch: pytest.MonkeyPatch, big: Path, tmp_path: Path, capsys: Any
) -> None:
    assert _run_task(monkeypatch, big, tmp_path, base="main") == 2
    table = capsys.readouterr().out
    assert len(table.splitlines()) < 40, table
    assert "  node-[001-1000] (1000, node): configure slurm, re-certify" in table.splitlines()
    assert "  head-001 (1, head): configure slurm" in table.splitlines()
    assert _run_task(monkeypatch, big, tmp_path, base="main", format="markdown") == 2
    text = capsys.readouterr().out
    assert len(text) < 65_536 and "| `node-[001-1000]` | 1000 | node |" in text
    assert _run_task(monkeypatch, big, tmp_path, base="main", json=True) == 2
    data = json.loads(capsys.readouterr().out)
    assert len(data["nodes"]) == 1001  # every node, the head too
    assert {g["nodes"]: g["count"] for g in data["groups"]} == {"head-001": 1, "node-[001-1000]": 1000}


def test_the_markdown_never_outgrows_a_comment_and_says_what_it_left_out() -> None:
    # 4,096 nodes that each change differently (the worst case for grouping)
    impacts = [
        NodeImpact(
            f"gpu-{i:04d}", "gpu", "gpu", configure=("nccl",), recertify=True, reasons=(f"why {i} " * 8,)
        )
        for i in range(4096)
    ]
    plan = Plan("big", "main", "working tree", impacts, notes=("the Slurm controller did not answer",))
    text = markdown(plan)
    assert len(text) <= MARKDOWN_LIMIT < 65_536
    shown = [line for line in text.splitlines() if line.startswith("| `gpu-")]
    assert 0 < len(shown) < 4096
    assert f"{4096 - len(shown)} more group(s) of changes ({4096 - len(shown)} node(s)) left out" in text
    assert "`invoke plan --format json` lists every node" in text
    assert text.rstrip().endswith("> note: the Slurm controller did not answer")


def test_nodes_with_the_same_change_share_a_group_and_a_different_one_stands_out() -> None:
    same = [
        NodeImpact(f"gpu-{i:03d}", "gpu", "gpu", configure=("nccl",), recertify=True) for i in range(1, 17)
    ]
    odd = NodeImpact("gpu-017", "gpu", "gpu", configure=("nccl", "slurm"), recertify=True)
    groups = group_changes([*same, odd, NodeImpact("gpu-018", "gpu", "gpu")])
    assert [(g.hostlist, len(g.nodes)) for g in groups] == [("gpu-[001-016]", 16), ("gpu-017", 1)]
