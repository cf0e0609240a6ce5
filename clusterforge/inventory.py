"""Render ``inventories/<stack>/hosts.yml`` and ``group_vars/`` from spec + catalogue + node list.

Groups (underscores, as ansible-lint wants): ``slurm_controller`` (head pools), ``gpu_nodes``
(gpu pools: the compute nodes, GPU or not), ``login_nodes``, and ``pool_<name>`` per pool.
Host vars carry the provider's connection vars plus ``clusterforge_address``/``clusterforge_pool``.
``group_vars/all/<concern>.yml`` holds each role's public variables (its API, see
``roles/<role>/defaults/main.yml``), rendered from the spec's software set; the files are
written atomically, and rendering is pure so it is tested without any node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clusterforge.ansible.runner import PODMAN_CONNECTION
from clusterforge.catalog import load_compat, load_hardware
from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.journal import write_atomic
from clusterforge.providers.base import Node
from clusterforge.providers.local.share import ShareError, node_shares
from clusterforge.spec.models import ClusterSpec

REPO_ROOT = Path(__file__).resolve().parents[1]
INVENTORIES = REPO_ROOT / "inventories"

ROLE_GROUPS = {"head": "slurm_controller", "gpu": "gpu_nodes", "login": "login_nodes"}

# Container nodes: podman mounts a tmpfs on /tmp that the podman connection plugin cannot copy
# into (it writes through the overlay), so Ansible's remote temp lives elsewhere.
CONTAINER_REMOTE_TMP = "/var/tmp/.ansible-tmp"

# slurmd registers the memory the kernel reports, less than the instance's nominal size; a
# RealMemory above it marks the node INVAL. ParallelCluster's cookbook declares 0.95 x the EC2
# memory (attributes `realmemory_to_ec2memory_ratio = 0.95`).
REAL_MEMORY_RATIO = 0.95


def real_memory_mb(memory_mib: int) -> int:
    """slurm.conf RealMemory for an instance type's nominal memory (MiB)."""
    return int(memory_mib * REAL_MEMORY_RATIO)


@dataclass(frozen=True)
class Inventory:
    hosts: dict[str, Any]  # hosts.yml content
    group_vars: dict[str, dict[str, Any]]  # file stem under group_vars/all/ -> variables


def _header(what: str) -> str:
    return f"# Rendered by clusterforge from the spec and the provider's node list: {what}. Do not edit.\n"


def host_vars(node: Node, hw: HardwareCatalog | None = None) -> dict[str, Any]:
    hv: dict[str, Any] = dict(node.connection)
    hv["clusterforge_address"] = node.address
    hv["clusterforge_pool"] = node.pool
    hv["clusterforge_instance_type"] = node.instance_type
    it = (hw or load_hardware()).get(node.instance_type)
    if it is not None:
        # What the hardware is, so roles can skip themselves where it does not apply.
        hv["clusterforge_gpu_count"] = it.gpu_count
        hv["clusterforge_nvswitch"] = bool(it.gpu and it.gpu.nvswitch)
        hv["clusterforge_efa_interfaces"] = it.network.efa_interfaces
        hv["clusterforge_container"] = it.container
        # The same facts under the role variables that act on them (roles never read clusterforge_*).
        hv["fabric_manager_enabled"] = bool(it.gpu and it.gpu.nvswitch)
        # NVLink5 baseboards (B200) also need nvlsm, infiniband-diags and ib_umad (compat fabric_manager).
        hv["fabric_manager_nvlink5"] = bool(
            it.gpu and it.gpu.nvswitch and load_compat().fabric_manager.is_nvlink5(it.gpu.architecture)
        )
        hv["efa_enabled"] = it.has_efa
        # Profiling metrics on Ampere and earlier need DCGM's proprietary packages (dcgm role).
        hv["dcgm_proprietary"] = dcgm_proprietary(it.gpu.architecture if it.gpu else None)
        hv["monitoring_gpu_count"] = it.gpu_count
        # No unattended kernel/driver upgrades where a driver module is loaded (common role).
        hv["common_unattended_upgrades"] = it.gpu is None
    if node.connection.get("ansible_connection", "").endswith((".podman", PODMAN_CONNECTION, ".docker")):
        hv.setdefault("ansible_remote_tmp", CONTAINER_REMOTE_TMP)
    return hv


def render_hosts(nodes: Sequence[Node], hw: HardwareCatalog | None = None) -> dict[str, Any]:
    children: dict[str, Any] = {group: {"hosts": {}} for group in ROLE_GROUPS.values()}
    for node in sorted(nodes, key=lambda n: n.name):
        group = ROLE_GROUPS.get(node.role)
        if group is None:
            raise ValueError(
                f"{node.name}: role {node.role!r} has no inventory group ({', '.join(ROLE_GROUPS)})"
            )
        children[group]["hosts"][node.name] = host_vars(node, hw)
        pool_group = f"pool_{node.pool.replace('-', '_')}"
        children.setdefault(pool_group, {"hosts": {}})["hosts"][node.name] = {}
    return {"all": {"children": children}}


def slurm_vars(
    spec: ClusterSpec, nodes: Sequence[Node], hw: HardwareCatalog, munge_key_file: Path
) -> dict[str, Any]:
    heads = sorted((n for n in nodes if n.role == "head"), key=lambda n: n.name)
    compute = sorted((n for n in nodes if n.role == "gpu"), key=lambda n: n.name)
    container = any(hw[n.instance_type].container for n in compute + heads if n.instance_type in hw)
    try:
        shares = node_shares(spec, hw)  # container nodes: what each one is given of this machine
    except ShareError:
        shares = {}  # the provider's preflight refuses such a stack before anything is rendered
    slurm_nodes = []
    for n in compute:
        it = hw[n.instance_type]
        share = shares.get(n.name)
        entry: dict[str, Any] = {
            "name": n.name,
            "address": n.address,
            "cpus": share.slurm_cpus if share else it.vcpus,
            "real_memory_mb": real_memory_mb(share.memory_mib if share else it.memory_mib),
            "gpu_count": it.gpu.count if it.gpu else 0,
            "hold": True,
        }
        if it.gpu:
            entry["gpu_type"] = it.gpu.model.lower()
            entry["gpu_files"] = f"/dev/nvidia[0-{it.gpu.count - 1}]"
        slurm_nodes.append(entry)
    partitions = []
    for part in spec.orchestration.partitions:
        members = [n.name for n in compute if n.pool in part.pools]
        partitions.append(
            {"name": part.name, "nodes": members, "default": part.default, "max_time": part.max_time}
        )
    out: dict[str, Any] = {
        "slurm_version": spec.software.slurm,
        "slurm_cluster_name": spec.stack,
        "slurm_controller_name": heads[0].name if heads else "",
        "slurm_controller_address": heads[0].address if heads else "",
        "slurm_nodes": slurm_nodes,
        "slurm_partitions": partitions,
        "slurm_munge_key_file": str(munge_key_file),
        "slurm_hold_new_nodes": True,
        "slurm_hold_reason": "clusterforge: certifying",
        **slurm_install_vars(spec, munge_key_file),
    }
    if container:
        # Container nodes: no writable cgroup hierarchy (ENVIRONMENT.md: linuxproc + task/none + cgroup/v1
        # on Slurm 22.05 without cgroup control); slurmd sees the whole machine, so the node lines (each
        # container's share) are taken as they are (config_overrides).
        out.update(
            slurm_proctrack_type="proctrack/linuxproc",
            slurm_task_plugin="task/none",
            slurm_cgroup_plugin="cgroup/v1",
            slurm_cgroup_constrain=False,
            slurm_select_type_parameters="CR_Core",
            slurm_slurmd_parameters="config_overrides",
        )
    return out


def dcgm_cuda_major(driver: str, cuda: str) -> str:
    """DCGM's datacenter-gpu-manager-4-cuda<N> follows the CUDA major of the DRIVER (DCGM's install
    guide reads it from nvidia-smi's "CUDA Version"), not the toolkit's: a 580 driver with a CUDA
    12.8 toolkit needs -cuda13. Unknown driver: the toolkit's major."""
    found = load_compat().driver_cuda_major(driver)
    return str(found if found is not None else cuda.split(".")[0])


# Hopper's compute capability: GPUs below it (Volta sm_70, Turing sm_75, Ampere sm_80/sm_86/sm_87, Ada
# sm_89) read profiling metrics through DCGM's proprietary profiling module.
DCGM_OPEN_PROFILING_FROM_SM = 90


def dcgm_proprietary(architecture: str | None) -> bool:
    """Whether a GPU of this architecture ("sm_80") needs datacenter-gpu-manager-4-proprietary for
    profiling metrics. NVIDIA/dcgm-exporter README, "Profiling Metrics": "for Ampere and earlier
    generation GPUs, profiling metrics depend on the datacenter-gpu-manager-4-proprietary package".
    The open-source host engine serves DCGM_FI_PROF_* through NVML GPM where the device supports it,
    else from the (proprietary) profiling module (NVIDIA/DCGM dcgmlib/src/DcgmCacheManager.cpp,
    "module-pushed field"); GPM starts with Hopper, so Ada (sm_89, no catalogue type has one) counts
    as earlier. No GPU or an unreadable architecture: False (nothing to profile, or nothing known)."""
    if not architecture or not architecture.startswith("sm_") or not architecture[3:].isdigit():
        return False
    return int(architecture[3:]) < DCGM_OPEN_PROFILING_FROM_SM


def software_vars(spec: ClusterSpec, containers: bool) -> dict[str, Any]:
    """The GPU software roles' API (INTERFACES.md "Role variables (gpu roles)"); versions are upstream
    strings, the roles add package revisions. ``containers``: every node is a local container."""
    sw = spec.software
    distro = sw.driver.source == "distro"
    out: dict[str, Any] = {
        "nvidia_driver_branch": sw.driver.branch,
        "nvidia_driver_version": sw.driver.version,
        "nvidia_driver_kernel_module": sw.driver.kernel_module,
        "nvidia_driver_source": sw.driver.source,
        # Containers share the host's kernel: no kernel module build (the userland still installs).
        "nvidia_driver_kernel_module_install": not containers,
        "cuda_toolkit_version": sw.cuda,
        "cuda_toolkit_source": sw.driver.source,
        # Debian's CUDA toolkit is over 1 GB per node and nothing on a container node compiles CUDA.
        "cuda_toolkit_enabled": not containers,
        # NCCL exists only in NVIDIA's repository, which a distro-sourced stack does not configure.
        "nccl_enabled": bool(sw.nccl) and not distro,
        "fabric_manager_driver_version": sw.driver.version,
        "fabric_manager_version": sw.fabric_manager or sw.driver.version,
    }
    optional = {
        "nccl_version": sw.nccl,
        "nccl_cuda_version": sw.cuda if sw.nccl else None,
        "nccl_tests_version": sw.nccl_tests,
        "efa_installer_version": sw.efa_installer,
        "efa_aws_ofi_nccl_version": sw.aws_ofi_nccl,
        "dcgm_version": sw.dcgm,
        "dcgm_cuda_major": dcgm_cuda_major(sw.driver.version, sw.cuda) if sw.dcgm else None,
        "container_runtime_toolkit_version": sw.nvidia_container_toolkit,
        "container_runtime_enroot_version": sw.enroot,
    }
    out.update({k: v for k, v in optional.items() if v})
    return out


def validators_vars(spec: ClusterSpec, nodes: Sequence[Node], hw: HardwareCatalog) -> dict[str, Any]:
    """validators_runtime: where torch comes from, where nccl-tests are (GPU types)."""
    containers = bool(nodes) and all(hw[n.instance_type].container for n in nodes)
    out: dict[str, Any] = {
        # Container nodes get torch installed once on the machine and mounted read-only by the
        # local provider (also when a static spec reaches such containers over SSH, as the static
        # integration test does); real nodes install it.
        "validators_runtime_torch": "shared" if containers else "pip",
    }
    if spec.software.nccl_tests and any(hw[n.instance_type].gpu for n in nodes):
        out["validators_runtime_nccl_tests_dir"] = f"/opt/nccl-tests/{spec.software.nccl_tests}"
    return out


def local_scratch_vars(spec: ClusterSpec) -> dict[str, Any]:
    """local_scratch (off by default): on AWS every compute node's NVMe instance-store disks as one
    RAID0 (a type without them is skipped with the reason); on static machines only where the spec
    asks (``storage.local_scratch``). Local containers render nothing: the role stays off."""
    scratch = spec.storage.local_scratch
    if spec.provider.kind != "aws" and not (spec.provider.kind == "static" and scratch is not None):
        return {}
    out: dict[str, Any] = {"local_scratch_enabled": True}
    if scratch is not None:
        out.update(local_scratch_mount_point=scratch.mount_point, local_scratch_filesystem=scratch.filesystem)
    return out


def cluster_hosts_vars(spec: ClusterSpec) -> dict[str, Any]:
    """cluster_hosts (off by default): EC2 nodes have no DNS names for each other (``gpu-001``).
    Local containers get their peers from the engine, static machines from their operator."""
    return {"cluster_hosts_enabled": True} if spec.provider.kind == "aws" else {}


def storage_vars(spec: ClusterSpec, outputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """shared_storage's API; an FSx file system's DNS and mount names come from the stack outputs
    (``outputs["fsx"]``, as ``stacks/components/cluster.export_cluster`` writes them)."""
    st = spec.storage
    out: dict[str, Any] = {}
    if st.shared_volume is not None:
        out.update(shared_storage_kind="volume", shared_storage_mount_point=st.shared_volume.mount_point)
    elif st.fsx_lustre is not None:
        fsx = (outputs or {}).get("fsx") or {}
        out.update(
            shared_storage_kind="fsx_lustre",
            shared_storage_mount_point=st.fsx_lustre.mount_point,
            # Empty before the file system exists: the role's preflight says which output is missing.
            shared_storage_fsx_dns_name=str(fsx.get("dns_name") or ""),
            shared_storage_fsx_mount_name=str(fsx.get("mount_name") or ""),
        )
    elif st.nfs is not None:
        out.update(
            shared_storage_kind="nfs",
            shared_storage_mount_point=st.nfs.mount_point,
            shared_storage_nfs_server=st.nfs.server,
            shared_storage_nfs_export=st.nfs.export,
        )
    return out


def monitoring_vars(spec: ClusterSpec) -> dict[str, Any]:
    """dcgm-exporter's own version (the role installs it only on hosts with GPUs); without one in
    the spec it is switched off, which the role reports as skipped."""
    if spec.software.dcgm_exporter:
        return {"monitoring_dcgm_exporter_version": spec.software.dcgm_exporter}
    return {"monitoring_dcgm_exporter_enabled": False}


def slurm_install_vars(spec: ClusterSpec, munge_key_file: Path) -> dict[str, Any]:
    """software.slurm_install -> the slurm role's install inputs. Built installs are kept beside the
    munge key, in the stack's state folder (``<state>/<stack>/slurm-builds``)."""
    install = spec.software.slurm_install
    if install.method == "package":
        return {}  # the role's default; nothing rendered, so package stacks keep their fingerprints
    out: dict[str, Any] = {
        "slurm_install_method": "source",
        "slurm_source_sha256": install.sha256 or "",
        "slurm_source_cache_dir": str(Path(munge_key_file).parent / "slurm-builds"),
    }
    if install.source_url:
        out["slurm_source_url"] = install.source_url
    return out


# The slurm role's source builds install the SPANK headers here (roles/slurm/vars/main.yml).
SLURM_SOURCE_INCLUDE_DIR = "/usr/local/include"


def pyxis_vars(spec: ClusterSpec) -> dict[str, Any]:
    """The pyxis SPANK plugin, built on every Slurm host against the installed Slurm's headers."""
    if not spec.software.pyxis:
        return {}
    out: dict[str, Any] = {"pyxis_version": spec.software.pyxis}
    if spec.software.slurm_install.method == "source":
        out["pyxis_slurm_include_dir"] = SLURM_SOURCE_INCLUDE_DIR
    return out


def render_inventory(
    spec: ClusterSpec,
    nodes: Sequence[Node],
    munge_key_file: Path,
    catalog: HardwareCatalog | None = None,
    outputs: Mapping[str, Any] | None = None,
) -> Inventory:
    """``outputs``: the provider's stack outputs where it has them (aws), for what only exists once
    provisioned (the FSx file system's names)."""
    hw = catalog or load_hardware()
    unknown = sorted({n.instance_type for n in nodes if n.instance_type not in hw})
    if unknown:
        raise ValueError(f"instance types not in the hardware catalogue: {', '.join(unknown)}")
    group_vars = {
        "clusterforge": {"clusterforge_stack": spec.stack, "clusterforge_provider": spec.provider.kind},
        "slurm": slurm_vars(spec, nodes, hw, munge_key_file),
        "software": software_vars(spec, bool(nodes) and all(hw[n.instance_type].container for n in nodes)),
        "shared_storage": storage_vars(spec, outputs),
        "monitoring": monitoring_vars(spec),
        "pyxis": pyxis_vars(spec),
        "validators_runtime": validators_vars(spec, nodes, hw),
    }
    # AWS-only roles: a file only where they are switched on (role defaults are off).
    for stem, variables in (
        ("local_scratch", local_scratch_vars(spec)),
        ("cluster_hosts", cluster_hosts_vars(spec)),
    ):
        if variables:
            group_vars[stem] = variables
    return Inventory(hosts=render_hosts(nodes, hw), group_vars=group_vars)


def write_inventory(inv: Inventory, folder: Path) -> Path:
    """Write ``hosts.yml`` and ``group_vars/all/*.yml`` under ``folder``; returns the hosts file."""
    hosts = folder / "hosts.yml"
    write_atomic(hosts, _header("hosts") + yaml.safe_dump(inv.hosts, sort_keys=False))
    gv_dir = folder / "group_vars" / "all"
    for stem, variables in inv.group_vars.items():
        text = _header(f"{stem} variables") + "---\n" + yaml.safe_dump(variables, sort_keys=False)
        write_atomic(gv_dir / f"{stem}.yml", text)
    # A renamed concern must not leave its old variables behind.
    for old in gv_dir.glob("*.yml"):
        if old.stem not in inv.group_vars:
            old.unlink()
    return hosts
