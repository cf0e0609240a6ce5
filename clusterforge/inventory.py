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
from clusterforge.catalog.hardware import HardwareCatalog, InstanceType
from clusterforge.catalog.torch_builds import spec_torch
from clusterforge.health.loop.render import loop_config, loop_enabled, package_hash
from clusterforge.journal import write_atomic
from clusterforge.providers.aws import role_vars as aws_role_vars
from clusterforge.providers.base import Node
from clusterforge.providers.local.share import ShareError, node_shares
from clusterforge.spec.models import ClusterSpec, CpuTopology

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

# The Open MPI the EFA installer installs (aws-efa-installer: openmpi40-aws / openmpi50-aws).
EFA_OPENMPI = "/opt/amazon/openmpi"


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
        if it.has_efa:
            # nccl-tests built against the EFA installer's Open MPI, as AWS builds it
            # (awsome-distributed-training nccl-tests.Dockerfile MPI_HOME=/opt/amazon/openmpi/).
            hv["nccl_tests_mpi_home"] = EFA_OPENMPI
            hv["nccl_tests_mpi_system"] = False
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
    topologies = {p.name: cpu_topology(p.cpu_topology, hw.get(p.instance_type)) for p in spec.node_pools}
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
        # Slurm >= 24.11 checks NVML GPU core affinity against socket boundaries: CPUs= alone reads
        # as CPUs one-core sockets and sets every GPU node invalid (compatibility.yaml slurm_node_topology).
        topo = topologies.get(n.pool)
        if topo is not None:
            entry.update(sockets=topo[0], cores_per_socket=topo[1], threads_per_core=topo[2])
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
    if loop_enabled(spec):  # else nothing: slurm.conf stays byte for byte what it was
        out.update(
            slurm_health_loop_enabled=True,
            slurm_health_loop_config=loop_config(spec, nodes, hw),
            slurm_health_loop_package_hash=package_hash(),
        )
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


def cpu_topology(pool_topology: CpuTopology | None, it: InstanceType | None) -> tuple[int, int, int] | None:
    """(sockets, cores per socket, threads per core) of a pool's nodes: the spec pool's
    ``cpu_topology``, else the hardware catalogue's ``cpu``, else None (node lines say CPUs only)."""
    if pool_topology is not None:
        return (pool_topology.sockets, pool_topology.cores_per_socket, pool_topology.threads_per_core)
    if it is not None and it.cpu is not None:
        return (it.cpu.sockets, it.cpu.cores_per_socket, it.cpu.threads_per_core)
    return None


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
    """validators_runtime: where torch comes from and which build, where nccl-tests are (GPU types).

    GPU nodes (every provider) get the torch build their driver and GPUs run, from its own index
    (compatibility.yaml torch, catalog/torch_builds.py): PyPI's plain torch is a CUDA 13 build from
    2.11 on, which an R570 driver cannot run."""
    containers = bool(nodes) and all(hw[n.instance_type].container for n in nodes)
    out: dict[str, Any] = {
        # Container nodes get torch installed once on the machine and mounted read-only by the
        # local provider (also when a static spec reaches such containers over SSH, as the static
        # integration test does); real nodes install it.
        "validators_runtime_torch": "shared" if containers else "pip",
    }
    pin = spec.software.torch
    if pin is not None:
        out["validators_runtime_torch_version"] = pin.version
    choice = None if containers else spec_torch(spec, hw, load_compat())
    if choice is not None:
        if choice.build is None:
            raise ValueError(f"software.torch: {choice.problem}")
        out["validators_runtime_torch_version"] = choice.build.pin
        out["validators_runtime_torch_index_url"] = choice.build.index_url
    if spec.software.nccl_tests and any(hw[n.instance_type].gpu for n in nodes):
        out["validators_runtime_nccl_tests_dir"] = f"/opt/nccl-tests/{spec.software.nccl_tests}"
    return out


# roles/local_scratch/defaults/main.yml local_scratch_mount_point.
LOCAL_SCRATCH_DEFAULT = "/scratch"


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
    # enroot's image cache and unpacked containers (what pyxis runs) on the NVMe scratch, not the root
    # volume: a few images fill a root EBS volume and stop the node. The runtime folder stays in /run.
    mount = scratch.mount_point if scratch is not None else LOCAL_SCRATCH_DEFAULT
    out.update(
        container_runtime_enroot_cache_path=f"{mount}/enroot/cache/group-$(id -g)",
        container_runtime_enroot_data_path=f"{mount}/enroot/data/user-$(id -u)",
    )
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
    image_digests: Mapping[str, str] | None = None,
) -> Inventory:
    """``outputs``: the provider's stack outputs where it has them (aws), for what only exists once
    provisioned (the FSx file system's names). ``image_digests``: pool -> the software digest its
    nodes must find in their baked image to skip the node software (pools with ``image: baked``;
    clusterforge.images.boot), rendered as each such node's ``node_image_software_digest``."""
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
    # AWS-only roles and settings: a file only where they apply (role defaults are off / neutral).
    for stem, variables in (
        ("local_scratch", local_scratch_vars(spec)),
        ("cluster_hosts", cluster_hosts_vars(spec)),
        ("time_sync", aws_role_vars.time_sync_vars(spec)),
        ("efa", aws_role_vars.efa_vars(spec)),
        ("reboot", aws_role_vars.reboot_vars(spec)),
    ):
        if variables:
            group_vars[stem] = variables
    hosts = render_hosts(nodes, hw)
    if image_digests:
        gpu_hosts = hosts["all"]["children"][ROLE_GROUPS["gpu"]]["hosts"]
        for node in nodes:
            if node.pool in image_digests and node.name in gpu_hosts:
                gpu_hosts[node.name]["node_image_software_digest"] = image_digests[node.pool]
    return Inventory(hosts=hosts, group_vars=group_vars)


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
