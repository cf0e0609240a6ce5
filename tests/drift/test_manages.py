"""Every role declares what it manages (meta/manages.yml), and every declaration evaluates."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clusterforge.drift.manages import ManagesError, managed_for, read_manages
from clusterforge.drift.nodes import nodes_now
from clusterforge.inventory import render_inventory, write_inventory
from clusterforge.node.pins import ROLES_DIR
from clusterforge.plan.inputs import placeholder_nodes
from clusterforge.spec.loader import REPO_ROOT, load_spec, stack_path

ROLES = sorted(p.name for p in ROLES_DIR.iterdir() if (p / "tasks").is_dir())


@pytest.mark.parametrize("role", ROLES)
def test_every_role_declares_what_it_manages(role: str) -> None:
    groups = read_manages(role)
    assert isinstance(groups, tuple)


@pytest.mark.parametrize("stack", ["local", "dev", "prod"])
def test_declarations_evaluate_for_every_node(stack: str, tmp_path: Path) -> None:
    spec, _ = load_spec(stack_path(stack))
    nodes = placeholder_nodes(spec)
    write_inventory(render_inventory(spec, nodes, Path("munge.key")), tmp_path / stack)
    now = nodes_now(spec, nodes, tmp_path / stack, REPO_ROOT / "playbooks")
    for name, node in now.items():
        assert not node.error, node.error
        assert node.managed is not None
        keys = node.managed.item_names()
        assert "package munge" in keys and "file /etc/slurm/slurm.conf" in keys, name
    compute = [n for n in nodes if n.role == "gpu"]
    assert "unit slurmd" in now[compute[0].name].managed.item_names()  # type: ignore[union-attr]
    heads = [n for n in nodes if n.role == "head"]
    assert "unit slurmctld" in now[heads[0].name].managed.item_names()  # type: ignore[union-attr]


def test_a_role_without_a_declaration_is_an_error_naming_the_file(tmp_path: Path) -> None:
    shutil.copytree(ROLES_DIR / "slurm", tmp_path / "slurm")
    (tmp_path / "slurm" / "meta" / "manages.yml").unlink()
    with pytest.raises(ManagesError, match=r"slurm/meta/manages.yml: missing"):
        managed_for({"slurm": [{}]}, {}, "debian-12", roles_dir=tmp_path)


def test_an_unknown_key_and_an_undefined_variable_are_named(tmp_path: Path) -> None:
    (tmp_path / "r" / "meta").mkdir(parents=True)
    path = tmp_path / "r" / "meta" / "manages.yml"
    path.write_text("manages:\n  - pakages: [x]\n")
    with pytest.raises(ManagesError, match=r"manages\[0\]: unknown key\(s\) pakages"):
        managed_for({"r": [{}]}, {}, "debian-12", roles_dir=tmp_path)
    (tmp_path / "s" / "meta").mkdir(parents=True)
    (tmp_path / "s" / "meta" / "manages.yml").write_text('manages:\n  - files: ["{{ nope_dir }}/a"]\n')
    with pytest.raises(ManagesError, match=r"roles/s/meta/manages.yml: manages\[0\]: cannot evaluate"):
        managed_for({"s": [{}]}, {}, "debian-12", roles_dir=tmp_path)
