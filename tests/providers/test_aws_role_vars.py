"""The rendered prod inventory carries what an AWS node needs that a container node does not: the
Amazon Time Sync Service, enroot's folders on the NVMe scratch, the EFA installer's verification,
and no inline reboot over SSM. Read back from the files Ansible reads."""

from __future__ import annotations

from pathlib import Path

import yaml

from clusterforge.inventory import render_inventory, write_inventory
from clusterforge.providers.aws.role_vars import AMAZON_TIME_SYNC, EFA_INSTALLER_KEY_FINGERPRINT
from clusterforge.providers.base import Node
from clusterforge.spec.loader import load_spec

STACKS = Path(__file__).resolve().parents[2] / "stacks"
SSM = {"ansible_connection": "amazon.aws.aws_ssm", "ansible_host": "i-0123456789abcdef0"}


def _all_vars(folder: Path) -> dict:
    merged: dict = {}
    for path in sorted((folder / "group_vars" / "all").glob("*.yml")):
        merged.update(yaml.safe_load(path.read_text()) or {})
    return merged


def test_the_rendered_prod_inventory_carries_time_scratch_and_the_installer_check(tmp_path: Path) -> None:
    spec, _ = load_spec(STACKS / "prod.yaml")
    nodes = [
        Node("head-001", "10.0.32.10", "head", "head", "m7i.4xlarge", SSM),
        Node("gpu-001", "10.0.0.10", "gpu", "gpu", "p5.48xlarge", SSM),
    ]
    write_inventory(render_inventory(spec, nodes, tmp_path / "munge.key"), tmp_path / "inv")
    gv = _all_vars(tmp_path / "inv")
    # chrony to 169.254.169.123: the egress group has no UDP/123 to Ubuntu's pools
    assert gv["common_ntp_servers"] == [AMAZON_TIME_SYNC] == ["169.254.169.123"]
    # enroot's image cache and container data (pyxis) on the RAID0 of the instance-store disks
    assert gv["local_scratch_enabled"] is True
    assert gv["container_runtime_enroot_cache_path"] == "/scratch/enroot/cache/group-$(id -g)"
    assert gv["container_runtime_enroot_data_path"] == "/scratch/enroot/data/user-$(id -u)"
    # the installer is checked against AWS's signing key (fingerprint from AWS's EFA guide)
    assert gv["efa_installer_version"] == "1.40.0"
    assert gv["efa_installer_gpg_fingerprint"] == EFA_INSTALLER_KEY_FINGERPRINT
    assert (
        "4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC".replace(" ", "") == EFA_INSTALLER_KEY_FINGERPRINT
    )
    # aws_ssm does not survive a reboot (amazon.aws #3044): the pipeline reboots, not the role
    assert gv["nvidia_driver_skip_reboot"] is True
    # the node lines carry p5's sockets (Slurm 25.11's socket-boundary check)
    (line,) = gv["slurm_nodes"]
    assert (line["sockets"], line["cores_per_socket"], line["threads_per_core"]) == (2, 48, 2)


def test_a_spec_sha256_is_rendered_beside_the_signature(tmp_path: Path) -> None:
    text = (
        (STACKS / "prod.yaml")
        .read_text()
        .replace(
            "  efa_installer: 1.40.0\n",
            "  efa_installer: 1.40.0\n  efa_installer_sha256: " + "ab" * 32 + "\n",
        )
    )
    (tmp_path / "prod.yaml").write_text(text)
    spec, _ = load_spec(tmp_path / "prod.yaml")
    gv = render_inventory(
        spec, [Node("gpu-001", "10.0.0.10", "gpu", "gpu", "p5.48xlarge", SSM)], tmp_path / "k"
    )
    assert gv.group_vars["efa"]["efa_installer_sha256"] == "ab" * 32


def test_local_stacks_render_none_of_it(tmp_path: Path) -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    nodes = [
        Node("node-001", "10.89.0.10", "gpu", "gpu", "local", {"ansible_connection": "podman_pipelined"})
    ]
    gv = render_inventory(spec, nodes, tmp_path / "k").group_vars
    assert not {"time_sync", "efa", "reboot", "local_scratch"} & set(gv)
