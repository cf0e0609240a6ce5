"""The invoke tasks' own logic: --nodes resizing, and `down` refusing to destroy unasked."""

from __future__ import annotations

from pathlib import Path

import pytest
from invoke import Context
from invoke.exceptions import Exit

from clusterforge.spec.loader import load_spec
from clusterforge.tasks import cluster
from tests.pipeline.fakes import FakeProvider

ROOT = Path(__file__).resolve().parents[2]


def test_nodes_option_resizes_the_compute_pool_only() -> None:
    spec, _ = load_spec(ROOT / "stacks" / "local.yaml")
    resized = cluster.with_compute_count(spec, 2)
    assert {p.name: p.count for p in resized.node_pools} == {"head": 1, "node": 2}
    with pytest.raises(Exit, match="at least 1"):
        cluster.with_compute_count(spec, 0)


def test_down_without_terminal_or_yes_refuses_and_destroys_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path))
    provider = FakeProvider()
    spec = cluster.load("local", "")
    provider.create(spec)
    monkeypatch.setattr("clusterforge.providers.get_provider", lambda _spec: provider)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False, raising=False)
    with pytest.raises(Exit) as err:
        cluster.down(Context(), stack="local")
    assert err.value.code == 2
    assert "stack 'local': 5 node(s)" in str(err.value.message) and "--yes" in str(err.value.message)
    assert len(provider.states) == 5  # nothing destroyed
    cluster.down(Context(), stack="local", yes=True)
    assert provider.states == {}


def test_stack_and_spec_are_exclusive() -> None:
    with pytest.raises(Exit, match="exactly one"):
        cluster.load("local", "x.yaml")
