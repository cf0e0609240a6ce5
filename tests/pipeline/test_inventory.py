"""Inventory rendering: groups, connection vars, Slurm node/partition lists; read back by ansible-inventory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusterforge.catalog import load_hardware
from clusterforge.inventory import CONTAINER_REMOTE_TMP, dcgm_cuda_major, render_inventory, write_inventory
from clusterforge.providers.base import Node
from clusterforge.spec.loader import load_spec

STACKS = Path(__file__).resolve().parents[2] / "stacks"
PODMAN = {
    "ansible_connection": "podman_pipelined",
    "ansible_podman_executable": "/usr/bin/podman",
    "ansible_python_interpreter": "/usr/bin/python3",
}


def local_nodes(n: int) -> list[Node]:
    nodes = [
        Node("head-001", "10.89.42.2", "head", "head", "local", {**PODMAN, "ansible_host": "local-head-001"})
    ]
    for i in range(1, n + 1):
        name = f"node-{i:03d}"
        nodes.append(
            Node(
                name,
                f"10.89.42.{10 + i}",
                "node",
                "gpu",
                "local",
                {**PODMAN, "ansible_host": f"local-{name}"},
            )
        )
    return nodes


def test_local_inventory(tmp_path: Path) -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    inv = render_inventory(spec, local_nodes(2), tmp_path / "munge.key")
    children = inv.hosts["all"]["children"]
    assert list(children["slurm_controller"]["hosts"]) == ["head-001"]
    assert list(children["gpu_nodes"]["hosts"]) == ["node-001", "node-002"]
    assert list(children["pool_node"]["hosts"]) == ["node-001", "node-002"]
    host = children["gpu_nodes"]["hosts"]["node-002"]
    assert host["ansible_host"] == "local-node-002" and host["clusterforge_address"] == "10.89.42.12"
    assert host["ansible_remote_tmp"] == CONTAINER_REMOTE_TMP  # not under the container's tmpfs /tmp
    assert host["clusterforge_gpu_count"] == 0 and host["clusterforge_container"] is True
    slurm = inv.group_vars["slurm"]
    assert slurm["slurm_controller_name"] == "head-001" and slurm["slurm_controller_address"] == "10.89.42.2"
    assert [n["name"] for n in slurm["slurm_nodes"]] == ["node-001", "node-002"]
    local = load_hardware()["local"]
    assert slurm["slurm_nodes"][0]["cpus"] == local.vcpus and slurm["slurm_nodes"][0]["gpu_count"] == 0
    assert slurm["slurm_partitions"] == [
        {"name": "batch", "nodes": ["node-001", "node-002"], "default": True, "max_time": "INFINITE"}
    ]
    assert slurm["slurm_proctrack_type"] == "proctrack/linuxproc"  # container nodes
    assert slurm["slurm_version"] == spec.software.slurm and slurm["slurm_cluster_name"] == "local"
    assert inv.group_vars["shared_storage"]["shared_storage_mount_point"] == "/shared"
    assert inv.group_vars["validators_runtime"] == {
        "validators_runtime_torch": "shared"
    }  # mounted, not per node


def test_gpu_nodes_get_gres() -> None:
    spec, _ = load_spec(STACKS / "prod.yaml")
    nodes = [
        Node("head-001", "10.0.32.5", "head", "head", "m7i.4xlarge", {"ansible_connection": "ssh"}),
        Node("gpu-001", "10.0.0.5", "gpu", "gpu", "p5.48xlarge", {"ansible_connection": "ssh"}),
    ]
    inv = render_inventory(spec, nodes, Path("/x/munge.key"))
    (entry,) = inv.group_vars["slurm"]["slurm_nodes"]
    assert (
        entry["gpu_count"] == 8 and entry["gpu_type"] == "h100" and entry["gpu_files"] == "/dev/nvidia[0-7]"
    )
    assert "slurm_proctrack_type" not in inv.group_vars["slurm"]  # real nodes keep the role's cgroup default
    # slurmd sees less than the nominal memory: RealMemory at 0.95 of it (ParallelCluster's ratio).
    p5 = load_hardware()["p5.48xlarge"]
    assert entry["real_memory_mb"] == int(p5.memory_mib * 0.95) < p5.memory_mib
    assert "ansible_remote_tmp" not in inv.hosts["all"]["children"]["gpu_nodes"]["hosts"]["gpu-001"]
    # No unattended upgrades where a driver module is loaded; the CPU head keeps the distribution's.
    children = inv.hosts["all"]["children"]
    assert children["gpu_nodes"]["hosts"]["gpu-001"]["common_unattended_upgrades"] is False
    assert children["slurm_controller"]["hosts"]["head-001"]["common_unattended_upgrades"] is True


@pytest.mark.parametrize(
    ("instance_type", "fabric_manager", "nvlink5"),
    [
        ("p6-b200.48xlarge", True, True),  # HGX B200: NVLink5 (nvlsm, infiniband-diags, ib_umad)
        ("p5.48xlarge", True, False),  # HGX H100: fourth-generation NVSwitch
        ("g5.xlarge", False, False),  # no NVSwitch
    ],
)
def test_nvlink5_nodes_get_the_subnet_manager(
    instance_type: str, fabric_manager: bool, nvlink5: bool
) -> None:
    from clusterforge.inventory import host_vars

    hv = host_vars(Node("gpu-001", "10.0.0.5", "gpu", "gpu", instance_type, {"ansible_connection": "ssh"}))
    assert (hv["fabric_manager_enabled"], hv["fabric_manager_nvlink5"]) == (fabric_manager, nvlink5)


def test_aws_inventory_names_the_fsx_file_system_and_pins_dcgm_exporter() -> None:
    spec, _ = load_spec(STACKS / "prod.yaml")
    nodes = [Node("gpu-001", "10.0.0.5", "gpu", "gpu", "p5.48xlarge", {"ansible_connection": "ssh"})]
    fsx = {"dns_name": "fs-0a.fsx.us-east-1.amazonaws.com", "mount_name": "abcdefgh", "mount_point": "/fsx"}
    inv = render_inventory(spec, nodes, Path("/x/munge.key"), outputs={"fsx": fsx})
    assert inv.group_vars["shared_storage"] == {
        "shared_storage_kind": "fsx_lustre",
        "shared_storage_mount_point": "/fsx",
        "shared_storage_fsx_dns_name": "fs-0a.fsx.us-east-1.amazonaws.com",
        "shared_storage_fsx_mount_name": "abcdefgh",
    }
    # dcgm-exporter's own version (not DCGM's), and pyxis for every Slurm host.
    assert inv.group_vars["monitoring"] == {"monitoring_dcgm_exporter_version": spec.software.dcgm_exporter}
    # prod builds Slurm from source: pyxis builds against its headers in /usr/local/include.
    assert inv.group_vars["pyxis"] == {
        "pyxis_version": spec.software.pyxis,
        "pyxis_slurm_include_dir": "/usr/local/include",
    }
    slurm = inv.group_vars["slurm"]
    assert slurm["slurm_install_method"] == "source"
    assert slurm["slurm_source_cache_dir"] == "/x/slurm-builds"  # beside the munge key, in the stack state
    # prod.yaml names the GitHub archive of SchedMD's tag and its sha256 (the spec's, rendered as given)
    assert slurm["slurm_source_sha256"] == "719783317e46b6241ab5c8f1e3f91e1e34fda63b5a1cd21403fa7696ec8d517c"
    assert slurm["slurm_source_url"].endswith("/slurm-25-11-2-1.tar.gz")
    # No dcgm_exporter in the spec: switched off (the role says it skipped), never left unpinned.
    local, _ = load_spec(STACKS / "local.yaml")
    assert render_inventory(local, local_nodes(1), Path("/x/k")).group_vars["monitoring"] == {
        "monitoring_dcgm_exporter_enabled": False
    }


@pytest.mark.parametrize(
    ("driver", "cuda", "major"),
    [
        ("570.133.20", "12.8.1", "12"),  # prod: 570 reports CUDA 12.8
        ("580.95.05", "12.8.1", "13"),  # a 580 driver reports CUDA 13.x whatever the toolkit
        ("535.261.03", "11.8.89", "12"),  # Debian's 535 with its 11.8 toolkit: the driver says 12.2
    ],
)
def test_dcgm_cuda_suffix_follows_the_driver(driver: str, cuda: str, major: str) -> None:
    assert dcgm_cuda_major(driver, cuda) == major


def test_unknown_instance_type_is_refused(tmp_path: Path) -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    bad = [Node("node-001", "10.0.0.1", "node", "gpu", "z1.nano", {})]
    with pytest.raises(ValueError, match="z1.nano"):
        render_inventory(spec, bad, tmp_path / "k")


@pytest.mark.slow
def test_written_inventory_reads_back_with_ansible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TMP"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    spec, _ = load_spec(STACKS / "local.yaml")
    hosts = write_inventory(render_inventory(spec, local_nodes(2), tmp_path / "munge.key"), tmp_path / "inv")
    bindir = Path(sys.executable).parent
    out = subprocess.run(
        [str(bindir / "ansible-inventory"), "-i", str(hosts), "--list"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    hostvars = data["_meta"]["hostvars"]
    assert hostvars["node-001"]["slurm_controller_name"] == "head-001"  # group_vars/all reached the host
    assert hostvars["node-001"]["ansible_connection"] == "podman_pipelined"
    assert sorted(data["gpu_nodes"]["hosts"]) == ["node-001", "node-002"]
    # re-rendering with fewer concerns removes stale group_vars files
    (tmp_path / "inv" / "group_vars" / "all" / "old.yml").write_text("---\nx: 1\n")
    write_inventory(render_inventory(spec, local_nodes(1), tmp_path / "munge.key"), tmp_path / "inv")
    assert not (tmp_path / "inv" / "group_vars" / "all" / "old.yml").exists()
