"""Each container node's fixed share of this machine: a CPU quota, whole cores where there are
enough, and memory.

A real node has its own processors. Container nodes share this machine's, and without limits a
node's figures depended on how many neighbours ran at the same moment (a healthy node came 55-66 %
under its peers on single-node gloo, and a node capped to a third of a core passed). So every node
gets a fixed share, sized from the machine and the stack's node count by the rules of its instance
type's ``share`` block (clusterforge/data/hardware.yaml): the compute nodes' quotas together stay
under the machine's cores less what the head node and the workstation itself need, so a healthy
node gets its whole quota whatever its neighbours do, and its figures are its own.

The share is what a local node *is*, as vCPUs and memory are for an EC2 type: the container gets it
at creation (``podman run --cpus/--cpuset-cpus/--memory``, and ``podman update`` when the node count
changes), Slurm's node lines declare it, and a stored baseline is used only for nodes of the same
share (``Share.label``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from clusterforge.catalog import load_hardware
from clusterforge.catalog.hardware import ContainerShare, HardwareCatalog
from clusterforge.spec.models import ClusterSpec

MEMINFO = Path("/proc/meminfo")
# A share is guaranteed as well as capped. The engine puts every container under one parent cgroup
# (podman: libpod_parent), which weighs as much as one plain process beside the machine's own: on a
# busy machine (load ~20 here, others' un-niced test runs) the nodes got 0.04 core each and every
# node failed its gloo check as starved. So each node's cgroup sits directly under the root, beside
# those processes, with this weight (cgroup v1 cpu.shares, 64 plain processes' worth; v2 maps it to
# cpu.weight); its quota keeps it from taking more than its share, and the quotas together leave
# ``workstation_cpus`` and the head's share to the rest of the machine.
CGROUP_PARENT = "/"
CPU_WEIGHT = 65536
# The quota is given per 10 ms, not the engine's default 100 ms: a node that used its quota waits out
# the rest of the period, and the single-node gloo check (two ranks, an all_reduce of ~0.15 s) was
# then quantised by it: its figures spread 0.69-0.92 (min over median, one run of 4 nodes) at 100 ms,
# 0.87-0.96 at 10 ms (6 runs, 3 of them beside a busy loop per core), on 0.375 CPU each.
CPU_PERIOD_US = 10_000
# The stack's nodes may take this much of the machine's memory, at most: the rest is the
# workstation's (Ansible, the engine, the page cache that the shared volume is written through).
MEMORY_FRACTION = 0.75


class ShareError(ValueError):
    """The machine cannot give the stack's nodes their shares; the message says what to change."""


@dataclass(frozen=True)
class Machine:
    """What this machine has to divide."""

    cpus: int
    memory_mib: int


def this_machine() -> Machine:
    """The CPUs this process may run on and the memory the kernel reports."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    memory_mib = 0
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_mib = int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        memory_mib = 0
    return Machine(cpus, memory_mib)


@dataclass(frozen=True)
class Share:
    """One node's share: ``cpus`` cores of CPU time (a CFS quota), on ``cpuset`` cores only when
    given, and ``memory_mib`` of memory."""

    cpus: float
    memory_mib: int
    cpuset: str = ""

    @property
    def label(self) -> str:
        """What a figure was measured with: baselines keep it, and use only samples of the same."""
        pinned = " pinned" if self.cpuset else ""
        return f"{self.cpus:g} CPU{pinned}, {self.memory_mib} MiB"

    @property
    def slurm_cpus(self) -> int:
        """Slurm's CPUs= for the node: a share under one core is still one schedulable CPU."""
        return max(1, math.floor(self.cpus))

    def engine_args(self) -> list[str]:
        """``podman run`` / ``podman update`` arguments that give a container this share (``run`` also
        takes ``--cgroup-parent CGROUP_PARENT``, which cannot be changed later)."""
        quota = max(1000, round(self.cpus * CPU_PERIOD_US))  # the kernel's least quota is 1 ms
        args = [
            "--cpu-period",
            str(CPU_PERIOD_US),
            "--cpu-quota",
            str(quota),
            "--cpu-shares",
            str(CPU_WEIGHT),
        ]
        args += ["--memory", f"{self.memory_mib}m"]
        return args + (["--cpuset-cpus", self.cpuset] if self.cpuset else [])


def _rules(spec: ClusterSpec, hw: HardwareCatalog) -> tuple[str, int, ContainerShare] | None:
    """The compute pools' container type, its memory and share rules (None: no container type)."""
    for pool in spec.pools_with_role("gpu"):
        it = hw.get(pool.instance_type)
        if it is not None and it.share is not None:
            return it.name, it.memory_mib, it.share
    return None


def compute_share(
    compute: int, heads: int, machine: Machine, memory_mib: int, rules: ContainerShare, kind: str = "local"
) -> tuple[float, bool]:
    """Each compute node's CPU quota beside ``heads`` head or login nodes, and whether it is whole
    cores of its own.

    Quota: (cores - head_cpus x heads - workstation_cpus) / compute, to the thousandth of a core
    (rounded down, so the quotas never add up to more than that). When that is a whole core or more,
    each node gets that many whole cores of its own (a cpuset), after the first cores, which the
    head nodes and the workstation keep; its quota is then exactly those cores.
    """
    if compute < 1:
        raise ShareError("a share is for compute nodes; the stack has none")
    reserved = rules.head_cpus * heads + rules.workstation_cpus
    per = math.floor((machine.cpus - reserved) / compute * 1000) / 1000
    if per < rules.min_cpus:
        fits = max(0, math.floor((machine.cpus - reserved) / rules.min_cpus))
        raise ShareError(
            f"{machine.cpus} CPU(s) cannot give {compute} {kind} compute node(s) {rules.min_cpus:g} CPU each "
            f"(the least a node certifies with; {reserved:g} CPU stay with the head node(s) and this machine): "
            f"each would get {max(per, 0):g}. Use at most {fits} compute node(s) (the gpu pool's count), "
            "or a machine with more cores"
        )
    whole = math.floor(per)
    if whole >= 1 and math.ceil(reserved) + whole * compute <= machine.cpus:
        return float(whole), True
    return per, False


def node_shares(
    spec: ClusterSpec, catalog: HardwareCatalog | None = None, machine: Machine | None = None
) -> dict[str, Share]:
    """Node name -> its share, for every node of a local stack ({} for other providers).

    Raises ``ShareError`` when the machine cannot hold the nodes (too many for its cores, or for
    its memory)."""
    if spec.provider.kind != "local":
        return {}
    hw = catalog or load_hardware()
    found = _rules(spec, hw)
    if found is None:
        return {}
    kind, memory_mib, rules = found
    box = machine or this_machine()
    compute = [n for p in spec.pools_with_role("gpu") for n in spec.node_names(p)]
    heads = [n for p in spec.node_pools if p.role != "gpu" for n in spec.node_names(p)]
    out = {name: Share(rules.head_cpus, rules.head_memory_mib) for name in heads}
    if not compute:
        return out
    cpus, pinned = compute_share(len(compute), len(heads), box, memory_mib, rules, kind)
    need = memory_mib * len(compute) + rules.head_memory_mib * len(heads)
    if box.memory_mib and need > box.memory_mib * MEMORY_FRACTION:
        raise ShareError(
            f"{len(compute)} {kind} compute node(s) of {memory_mib} MiB and {len(heads)} head node(s) of "
            f"{rules.head_memory_mib} MiB need {need} MiB, more than {MEMORY_FRACTION:.0%} of this machine's "
            f"{box.memory_mib} MiB: use fewer compute nodes (the gpu pool's count) or a machine with more memory"
        )
    first = math.ceil(rules.head_cpus * len(heads) + rules.workstation_cpus)  # the cores pinned nodes leave
    for i, name in enumerate(compute):
        cpuset = ""
        if pinned:
            lo, hi = first + i * int(cpus), first + (i + 1) * int(cpus) - 1
            cpuset = str(lo) if lo == hi else f"{lo}-{hi}"
        out[name] = Share(cpus, memory_mib, cpuset)
    return out


def compute_share_label(spec: ClusterSpec, catalog: HardwareCatalog | None = None) -> str:
    """The share of a local stack's compute nodes (they all have the same), as ``Share.label``; ""
    for other providers, or when the machine cannot hold the stack (nothing is compared by share)."""
    try:
        shares = node_shares(spec, catalog)
    except ShareError:
        return ""
    compute = [n for p in spec.pools_with_role("gpu") for n in spec.node_names(p)]
    return shares[compute[0]].label if compute and compute[0] in shares else ""
