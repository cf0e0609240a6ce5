"""Render NODE.json (validators/SCHEMA.md, schema_version 1) for one node from spec + catalogue.

The validators never read the spec or the catalogues: everything a node is judged against
(what it is, which versions are pinned, the floors, how long to run, where shared storage is,
who its peers are) reaches it through this one file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from clusterforge.catalog import load_compat, load_hardware
from clusterforge.catalog.hardware import HardwareCatalog, InstanceType
from clusterforge.catalog.torch_builds import spec_torch
from clusterforge.node.pins import PinError, package_pins
from clusterforge.providers.base import Node
from clusterforge.spec.models import CertificationProfile, ClusterSpec

SCHEMA_VERSION = 1

# Spec software field -> NODE.json software key (same names), and when it applies to a node.
_SOFTWARE = (
    "driver",
    "cuda",
    "nccl",
    "efa_installer",
    "aws_ofi_nccl",
    "fabric_manager",
    "dcgm",
    "nvidia_container_toolkit",
    "enroot",
    "slurm",
    "torch",
)

# The gloo all_reduce of the network check (CPU path) listens here on the first node.
GLOO_PORT = 29511
# How nccl-multi-node starts its ranks inside a group test's Slurm job (the job has the whole nodes
# and their GPUs, certify/network/jobs.GroupJobs): one task per GPU on every node of the job, wired up by
# PMIx, the way NCCL tests are launched under Slurm with an MPI build of nccl-tests (the nccl role
# builds them with MPI=1). validators fills the {placeholders} (validators/SCHEMA.md nccl.launcher).
GPU_GROUP_LAUNCHER = ("srun", "--nodes={nnodes}", "--ntasks-per-node={gpus_per_node}", "--mpi=pmix")

# checkpoint-restart's checkpoint (per rank) when the profile sets no checkpoint_mib. Our rule, not
# a published figure: large enough that the rates measure the storage, not per-file overhead (on a
# local container, a 1.6 MB checkpoint wrote at 0.02-0.23 x plain sequential I/O on the same path;
# 256 MiB at 0.6-2.7 x). GPU types: 1/16 of one GPU's memory (5 GiB on an 80 GB H100), the order
# of one rank's share of a sharded training state, still seconds at parallel-filesystem rates.
CONTAINER_CHECKPOINT_MIB = 256
GPU_CHECKPOINT_FRACTION = 16


# nccl-multi-node's collectives per validators suite when the profile names none. quick keeps to
# all_reduce (each collective is one more run per group job); standard and full add all_gather and
# alltoall, which load the fabric unlike a ring all_reduce (alltoall: every rank to every rank, as
# expert parallelism does) and so find NICs and links an all_reduce alone passes.
MULTI_NODE_COLLECTIVES = {
    "quick": ("all_reduce",),
    "standard": ("all_reduce", "all_gather", "alltoall"),
    "full": ("all_reduce", "all_gather", "alltoall"),
}


class NodeConfigError(Exception):
    pass


def profile_for(
    spec: ClusterSpec, pool_name: str, override: str | None = None
) -> tuple[str, CertificationProfile]:
    """The certification profile of a pool (or the one asked for), with a clear error when missing."""
    name = override or spec.pool(pool_name).certification
    profiles = spec.certification.profiles
    if not name:
        raise NodeConfigError(
            f"node_pools[{pool_name}].certification: not set; name one of certification.profiles "
            f"({', '.join(sorted(profiles)) or 'none defined'})"
        )
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none defined"
        raise NodeConfigError(
            f"certification profile {name!r} is not in certification.profiles (known: {known})"
        )
    return name, profiles[name]


def pinned_software(
    spec: ClusterSpec, it: InstanceType, components: Iterable[str] | None = None
) -> dict[str, str]:
    """Versions a node of this type must carry. ``components`` limits them to what the stack installs."""
    sw = spec.software
    values: dict[str, str | None] = {
        "driver": sw.driver.version if it.gpu else None,
        "cuda": sw.cuda if it.gpu else None,
        "nccl": sw.nccl if it.gpu else None,  # the nccl role installs it on GPU types only
        "efa_installer": sw.efa_installer if it.has_efa else None,
        "aws_ofi_nccl": sw.aws_ofi_nccl if it.has_efa else None,
        "fabric_manager": sw.fabric_manager if it.gpu and it.gpu.nvswitch else None,
        "dcgm": sw.dcgm if it.gpu else None,
        "nvidia_container_toolkit": sw.nvidia_container_toolkit if it.gpu else None,
        "enroot": sw.enroot if it.gpu else None,
        "slurm": sw.slurm,
        "torch": torch_pin(spec, it),
    }
    allowed = set(components) if components is not None else set(_SOFTWARE)
    return {k: v for k, v in values.items() if v and k in allowed}


def torch_pin(spec: ClusterSpec, it: InstanceType) -> str | None:
    """The torch build python-runtime expects: on GPU types the build the driver runs, with its
    local label (2.13.0+cu126, compatibility.yaml torch); elsewhere the spec's version, if pinned."""
    if it.gpu is not None and not it.container:
        choice = spec_torch(spec, load_hardware(), load_compat())
        if choice is not None and choice.build is None:
            raise NodeConfigError(f"software.torch: {choice.problem}")
        return choice.build.pin if choice is not None and choice.build is not None else None
    return spec.software.torch.version if spec.software.torch is not None else None


def thresholds(
    it: InstanceType, profile: CertificationProfile, common: dict[str, float] | None = None
) -> dict[str, float]:
    """Catalogue floors with the profile's overrides, plus the message size each NCCL floor holds at
    and the catalogue's ``common_thresholds`` (e.g. checkpoint.write_ratio_min)."""
    out: dict[str, float] = dict(it.thresholds.with_overrides(profile.thresholds))
    for key, value in (common or {}).items():
        out.setdefault(key, profile.thresholds.get(key, value))
    for t in it.thresholds.nccl:
        out.setdefault(t.key.replace(".busbw_gbps", ".message_bytes"), float(t.message_bytes))
    # Overrides the catalogue does not know (e.g. checkpoint.write_ratio_min) are the checks' own keys.
    for key, value in profile.thresholds.items():
        out.setdefault(key, value)
    if it.gpu is None:
        # No GPU: the CPU path (gloo-allreduce) measures the network and reads gloo.* keys; the
        # catalogue states those floors under nccl.* for the instance type.
        for key in [k for k in out if k.startswith("nccl.")]:
            out.setdefault("gloo." + key.removeprefix("nccl."), out[key])
    return out


def _pins(spec: ClusterSpec, node: Node, it: InstanceType, hw: HardwareCatalog) -> list[dict[str, Any]]:
    """The packages the roles pin and hold on this node, from the roles' own variables."""
    try:
        return [p.as_node_json() for p in package_pins(spec, node, it, hw)]
    except PinError as exc:
        raise NodeConfigError(f"{node.name}: {exc}") from None


def multi_node_collectives(profile: CertificationProfile) -> list[str]:
    """NODE.json nccl.multi_node_collectives: the profile's list, else its suite's default."""
    if profile.multi_node_collectives is not None:
        return list(profile.multi_node_collectives)
    return list(MULTI_NODE_COLLECTIVES[profile.suite])


def checkpoint_bytes(it: InstanceType, profile: CertificationProfile) -> int:
    """NODE.json sizes.checkpoint_bytes: the profile's checkpoint_mib, else the rule above."""
    if profile.checkpoint_mib is not None:
        return profile.checkpoint_mib << 20
    if it.gpu is not None and not it.container:
        return max(CONTAINER_CHECKPOINT_MIB, it.gpu.memory_mib // GPU_CHECKPOINT_FRACTION) << 20
    return CONTAINER_CHECKPOINT_MIB << 20


def sizes(it: InstanceType, profile: CertificationProfile) -> dict[str, Any]:
    """NODE.json sizes: checkpoint_bytes always; gloo_sweep_bytes when the profile sets gloo_sweep_mib
    (else the validators profile's own sweep applies)."""
    out: dict[str, Any] = {"checkpoint_bytes": checkpoint_bytes(it, profile)}
    if profile.gloo_sweep_mib is not None:
        out["gloo_sweep_bytes"] = [mib << 20 for mib in profile.gloo_sweep_mib]
    return out


def durations(profile: CertificationProfile) -> dict[str, float]:
    d = profile.durations
    return {
        "burnin_seconds": d.burnin_seconds,
        "nccl_iterations": d.nccl_iterations,
        "gloo_iterations": d.nccl_iterations,
        "checkpoint_steps": d.checkpoint_steps,
    }


def render_node_config(
    spec: ClusterSpec,
    node: Node,
    peers: Sequence[Node] = (),
    *,
    profile: str | None = None,
    components: Iterable[str] | None = None,
    catalog: HardwareCatalog | None = None,
    launcher: Sequence[str] = (),
) -> dict[str, Any]:
    """NODE.json as a dict. ``peers``: the other nodes of the multi-node check (not ``node`` itself)."""
    hw = catalog or load_hardware()
    it = hw.get(node.instance_type)
    if it is None:
        raise NodeConfigError(
            f"{node.name}: instance type {node.instance_type!r} is not in the hardware catalogue"
        )
    _, prof = profile_for(spec, node.pool, profile)
    config: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "node": node.name,
        "instance_type": it.name,
        "software": pinned_software(spec, it, components),
        "pins": _pins(spec, node, it, hw),
        "durations": durations(prof),
        "sizes": sizes(it, prof),
        "thresholds": thresholds(it, prof, hw.common_thresholds.values),
        "peers": [{"name": p.name, "address": p.address} for p in peers if p.name != node.name],
        "skip_checks": list(prof.skip_checks),
    }
    if it.gpu:
        config["gpu"] = {
            "count": it.gpu.count,
            "model": it.gpu.model,
            "nvlink_links_per_gpu": it.gpu.nvlink_links_per_gpu,
            "nvswitch": it.gpu.nvswitch,
        }
    if it.has_efa:
        config["efa"] = {"interfaces": it.network.efa_interfaces}
        config["limits"] = {"memlock_kib": "unlimited"}
    if it.network.infiniband_ports:
        # The compute fabric the catalogue declares (bare-metal types, e.g. dgx-h100): infiniband-ports.
        config["infiniband"] = {"count": it.network.infiniband_ports}
        if it.network.infiniband_rate_gbps:
            config["infiniband"]["rate_gbps"] = it.network.infiniband_rate_gbps
    shared = spec.storage.shared_path
    if shared:
        config["shared_storage"] = {"path": shared, "require_mount": True}
    nccl: dict[str, Any] = {}
    if it.gpu:
        nccl["multi_node_collectives"] = multi_node_collectives(prof)
    if launcher:
        nccl.update({"launcher": list(launcher), "port": GLOO_PORT})
    if nccl:
        config["nccl"] = nccl
    return config


def dumps(config: dict[str, Any]) -> str:
    return json.dumps(config, indent=2, sort_keys=True) + "\n"
