"""Checks on pairings the packages themselves enforce: DCGM's per-CUDA packages against the driver,
and Slurm's socket-boundary rule against the GPU nodes' CPU topology (compatibility.yaml
``dcgm_cuda`` and ``slurm_node_topology``)."""

from __future__ import annotations

from collections.abc import Iterable

from clusterforge.catalog.versions import at_least, major_minor
from clusterforge.spec.checks.base import Check, CheckContext, Issue, error

SW = "software"


class DcgmCuda(Check):
    id = "dcgm-cuda"
    summary = "DCGM ships a datacenter-gpu-manager-4-cuda<N> package for the driver's CUDA major"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        sw = ctx.spec.software
        if sw.dcgm is None or not any(ctx.gpu_pools()):
            return
        # The dcgm role installs the package of the DRIVER's CUDA major (inventory.dcgm_cuda_major).
        cuda_major = ctx.compat.driver_cuda_major(sw.driver.version)
        if cuda_major is None:
            return  # cuda-driver reports a driver below every CUDA release
        rule = ctx.compat.dcgm_cuda_rule(cuda_major)
        known = ", ".join(f"-cuda{r.cuda_major} from {r.dcgm_min}" for r in ctx.compat.dcgm_cuda)
        if rule is None:
            yield error(
                f"{SW}.dcgm",
                f"driver {sw.driver.version} reports CUDA {cuda_major}, and compatibility.yaml dcgm_cuda knows no "
                f"datacenter-gpu-manager-4-cuda{cuda_major} package (known: {known}); add the rule with its source",
            )
        elif not at_least(sw.dcgm, rule.dcgm_min):
            yield error(
                f"{SW}.dcgm",
                f"DCGM {sw.dcgm} has no datacenter-gpu-manager-4-cuda{cuda_major} package, which driver "
                f"{sw.driver.version} (CUDA {cuda_major}) needs (rule dcgm_cuda in compatibility.yaml: -cuda{cuda_major} "
                f"from DCGM {rule.dcgm_min}); set software.dcgm to {rule.dcgm_min} or later (and dcgm_exporter to "
                f"its pair), or keep a driver below the CUDA {cuda_major} branch",
            )


class SlurmNodeTopology(Check):
    id = "slurm-node-topology"
    summary = "From Slurm 24.11, GPU nodes carry sockets/cores/threads in slurm.conf (NVML affinity check)"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        rule = ctx.compat.slurm_node_topology
        slurm = ctx.spec.software.slurm
        if rule is None or not rule.applies(slurm):
            return
        for i, pool, it in ctx.gpu_pools():
            if it.gpu is None or pool.cpu_topology is not None:
                continue
            if it.cpu is None:
                yield error(
                    f"node_pools[{i}].cpu_topology",
                    f"Slurm {major_minor(slurm)} (>= {rule.from_family}) sets a GPU node invalid when its NVML "
                    f"core affinity does not match socket boundaries (rule slurm_node_topology in "
                    f"compatibility.yaml), and {it.name} (pool {pool.name!r}) has no CPU topology in the hardware "
                    f"catalogue, so its node line would carry CPUs={it.vcpus} alone ({it.vcpus} one-core sockets). "
                    f"Set node_pools[{i}].cpu_topology {{sockets, cores_per_socket, threads_per_core}} from "
                    f"`slurmd -C` on one node, or stay below Slurm {rule.from_family}",
                )
        for i, pool in ctx.pools():
            topo = pool.cpu_topology
            itype = ctx.hardware.get(pool.instance_type)
            if topo is None or itype is None:
                continue
            total = topo.sockets * topo.cores_per_socket * topo.threads_per_core
            if total != itype.vcpus:
                yield error(
                    f"node_pools[{i}].cpu_topology",
                    f"{topo.sockets} sockets x {topo.cores_per_socket} cores x {topo.threads_per_core} threads = "
                    f"{total} CPUs, but {itype.name} has {itype.vcpus} vCPUs; copy the figures `slurmd -C` prints",
                )
