"""NODE.json pins come from the roles' own variables and agree with the rendered inventory."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.catalog import load_compat, load_hardware
from clusterforge.inventory import render_inventory
from clusterforge.node.config import render_node_config
from clusterforge.node.pins import ROLES_DIR, PackagePin, package_pins, rules
from clusterforge.providers.base import Node
from clusterforge.spec.loader import load_spec
from validators.config import parse_config

STACKS = Path(__file__).resolve().parents[2] / "stacks"
HW = load_hardware()


def _node(role: str, instance_type: str, name: str = "node-001") -> Node:
    return Node(name, "10.89.42.11", "node", role, instance_type, {"ansible_connection": "local"})


@pytest.mark.parametrize("rule", rules(), ids=lambda r: f"{r.role}:{r.packages}")
def test_every_quoted_expression_is_still_in_its_task_file(rule) -> None:  # type: ignore[no-untyped-def]
    text = (ROLES_DIR / rule.role / rule.task).read_text(encoding="utf-8")
    for quoted in rule.quoted:
        assert quoted in text, (
            f"roles/{rule.role}/{rule.task} no longer has {quoted!r}: update package_pins._RULES"
        )


def test_local_compute_node_pins_driver_userland_and_slurm() -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    pins = {p.package: p for p in package_pins(spec, _node("gpu", "local"), HW["local"], HW)}
    driver = f"{spec.software.driver.version}-*"  # distro source: any Debian revision of the version
    assert pins["nvidia-smi"] == PackagePin("nvidia-smi", driver, True, "nvidia_driver")
    assert pins["libnvidia-ml1"].version == pins["libcuda1"].version == driver
    assert pins["nvidia-persistenced"].version == ""  # its own version scheme, held only
    assert not any("dkms" in name for name in pins)  # containers build no kernel module
    for name in ("slurmd", "slurm-client", "slurm-wlm-basic-plugins", "libslurm-dev"):
        assert pins[name].version == f"{spec.software.slurm}-*" and pins[name].held
    # The roles install munge and node_exporter unpinned and do not hold them (monitoring
    # defaults: monitoring_node_exporter_version "" = not held; slurm tasks/munge.yml).
    assert "munge" not in pins and "prometheus-node-exporter" not in pins
    assert "nvidia-cuda-toolkit" not in pins  # cuda_toolkit_enabled is false on container nodes


def test_pins_follow_the_inventory_variables() -> None:
    """Render the inventory as configure does and read the versions back out of it."""
    spec, _ = load_spec(STACKS / "prod.yaml")
    n = _node("gpu", "p5.48xlarge", "gpu-001")
    inv = render_inventory(spec, [n], Path("/nonexistent/munge.key"))
    sw, slurm = inv.group_vars["software"], inv.group_vars["slurm"]
    pins = {p.package: p for p in package_pins(spec, n, HW["p5.48xlarge"], HW)}
    branch = sw["nvidia_driver_version"].split(".")[0]
    # "-*ubuntu1": NVIDIA's revision went from -0ubuntu1 to -1ubuntu1 within 580 (roles/nvidia_driver/vars)
    assert pins[f"nvidia-utils-{branch}"].version == sw["nvidia_driver_version"] + "-*ubuntu1"
    assert pins["slurmd"].version == slurm["slurm_version"] + "-*"
    assert pins["libnccl2"].version.startswith(sw["nccl_version"] + "-1+cuda")
    # Fabric Manager's names carry the branch up to 575 only (compat fabric_manager.unbranched_from)
    fm, nscq, nvsdm = load_compat().fabric_manager.package_names(int(branch))
    assert pins[fm].version.startswith(sw["fabric_manager_version"] + "-")
    assert pins[nvsdm].version.startswith(sw["fabric_manager_version"] + "-")  # NVSwitch monitoring
    assert pins["datacenter-gpu-manager-4-core"].version == f"1:{sw['dcgm_version']}-1"
    assert pins["nvidia-container-toolkit"].version == sw["container_runtime_toolkit_version"] + "-1"
    assert pins["datacenter-gpu-manager-exporter"].version == spec.software.dcgm_exporter + "-*"


def test_node_json_carries_the_pins_and_the_validators_read_them() -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    n = _node("gpu", "local")
    parsed = parse_config(render_node_config(spec, n), "quick")
    assert {p.package for p in parsed.pins} == {p.package for p in package_pins(spec, n, HW["local"], HW)}
    assert all(p.held for p in parsed.pins)


def test_a_spec_change_moves_the_pin(tmp_path: Path) -> None:
    text = (STACKS / "local.yaml").read_text().replace("slurm: 22.05.8", "slurm: 22.05.9")
    (tmp_path / "local.yaml").write_text(text)
    spec, _ = load_spec(tmp_path / "local.yaml")
    pins = {p.package: p for p in package_pins(spec, _node("gpu", "local"), HW["local"], HW)}
    assert pins["slurmd"].version == "22.05.9-*"


@pytest.mark.parametrize(("instance_type", "proprietary"), [("p4d.24xlarge", True), ("p5.48xlarge", False)])
def test_ampere_nodes_pin_the_proprietary_dcgm_pair(instance_type: str, proprietary: bool) -> None:
    """Profiling metrics on Ampere and earlier need datacenter-gpu-manager-4-proprietary (dcgm-exporter
    README, "Profiling Metrics"); the dcgm role pins and holds it, so NODE.json pins carry it too."""
    spec, _ = load_spec(STACKS / "prod.yaml")
    n = _node("gpu", instance_type, "gpu-001")
    pins = {p.package: p for p in package_pins(spec, n, HW[instance_type], HW)}
    core = pins["datacenter-gpu-manager-4-core"]
    names = [p for p in pins if p.startswith("datacenter-gpu-manager-4-proprietary")]
    if proprietary:
        cuda_major = load_compat().driver_cuda_major(spec.software.driver.version)  # the driver's, 13 on 580
        assert sorted(names) == [
            "datacenter-gpu-manager-4-proprietary",
            f"datacenter-gpu-manager-4-proprietary-cuda{cuda_major}",
        ]
        assert all(pins[p].version == core.version and pins[p].held for p in names)
    else:
        assert names == []
