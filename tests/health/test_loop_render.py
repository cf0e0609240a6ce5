"""What the workstation renders for the loop: on only with an active profile and shared storage."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from clusterforge.catalog import load_hardware
from clusterforge.certify.fleet.inputs import fleet_inputs
from clusterforge.health.loop.config import parse_config
from clusterforge.health.loop.render import fleet_part, loop_config, loop_enabled, package_hash
from clusterforge.inventory import slurm_vars
from clusterforge.providers.base import Node
from clusterforge.spec.loader import load_spec
from clusterforge.spec.models import ClusterSpec

ROOT = Path(__file__).resolve().parents[2]


def nodes() -> list[Node]:
    return [
        Node("head-001", "10.0.0.2", "head", "head", "local", {}, "c-head"),
        *(Node(f"node-00{i}", f"10.0.0.{10 + i}", "gpu", "gpu", "local", {}, f"c-{i}") for i in (1, 2)),
    ]


def spec_with(tmp_path: Path, health: str) -> ClusterSpec:
    path = tmp_path / "local.yaml"
    path.write_text((ROOT / "stacks" / "local.yaml").read_text() + health)
    return load_spec(path)[0]


def test_the_local_stack_has_no_loop_and_its_slurm_vars_do_not_change(tmp_path: Path) -> None:
    spec = load_spec(ROOT / "stacks" / "local.yaml")[0]
    assert not loop_enabled(spec)
    out = slurm_vars(spec, nodes(), load_hardware(), tmp_path / "munge.key")
    assert not [k for k in out if "health" in k]


def test_an_active_profile_and_shared_storage_turn_it_on(tmp_path: Path) -> None:
    spec = spec_with(tmp_path, "health:\n  active: {profile: quick, every: 12h, max_nodes: 1}\n")
    assert loop_enabled(spec)
    hw = load_hardware()
    out = slurm_vars(spec, nodes(), hw, tmp_path / "munge.key")
    assert out["slurm_health_loop_enabled"] is True
    assert out["slurm_health_loop_package_hash"] == package_hash()  # a changed package converges the head
    cfg = parse_config(out["slurm_health_loop_config"])
    assert sorted(cfg.nodes) == ["node-001", "node-002"] and cfg.nodes["node-001"].identities == ("c-1",)
    assert cfg.state_dir == Path(f"{spec.storage.shared_path}/clusterforge-health")
    assert cfg.active_suite == "quick" and cfg.provider == "local" and cfg.replaceable
    full = fleet_inputs(spec, "quick", hw)
    part = fleet_part(spec, hw)
    assert part == {
        "overrides": full.overrides,
        "across_versions": full.across_versions,
        "shares": full.shares,
    }
    assert loop_config(spec, nodes(), hw)["fleet"] == part


@pytest.mark.parametrize("unit", ["service", "timer"])
def test_the_timer_runs_the_loop_as_a_module(unit: str) -> None:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True)
    text = env.from_string(
        (ROOT / "roles" / "slurm" / "templates" / f"clusterforge-health-loop.{unit}.j2").read_text()
    ).render(
        ansible_managed="Ansible managed",
        _slurm_controller_service="slurmctld",
        slurm_health_loop_python="/opt/clusterforge/venv/bin/python",
        _slurm_health_loop_config_path="/etc/clusterforge/health-loop.json",
        slurm_health_loop_interval="5min",
    )
    if unit == "service":
        assert (
            "ExecStart=/opt/clusterforge/venv/bin/python -m clusterforge.health.loop "
            "--config /etc/clusterforge/health-loop.json" in text.splitlines()
        )
        assert "Type=oneshot" in text
    else:
        assert "OnUnitActiveSec=5min" in text.splitlines()
