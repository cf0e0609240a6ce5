"""The hardware catalogue: what each instance type is, and what a healthy one must measure.

Data lives in ``clusterforge/data/hardware.yaml`` (every figure cites a source id declared in
that file's ``sources`` table); this module only gives it types and a cached loader.

A figure no public source states outright (a floor derived from a neighbouring type, a policy
choice) is marked ``estimate: true`` and must say in its ``note`` what it was derived from;
``HardwareCatalog.estimates()`` lists them all, so none passes for a sourced figure.

Units: ``bandwidth_gbps`` is the network line rate in Gbit/s (as AWS states it);
``busbw_gbps_min`` is NCCL bus bandwidth in GB/s (gigabytes, as nccl-tests prints it).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clusterforge import strict_yaml

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
HARDWARE_FILE = DATA_DIR / "hardware.yaml"

Architecture = Literal["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_103"]
Collective = Literal["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Judged(_Data):
    """A figure or floor that is either sourced, or an estimate whose note gives its reasoning."""

    estimate: bool = Field(False, description="No source states it; the note says how it was derived")
    note: str = ""

    @model_validator(mode="after")
    def _estimate_explained(self) -> _Judged:
        if self.estimate and not self.note.strip():
            raise ValueError("an estimate needs a note saying what it was derived from and why")
        return self


class GpuSpec(_Data):
    model: str = Field(description="Marketing name as AWS reports it: A100, A10G, H100, H200, B200")
    count: int = Field(ge=1)
    memory_mib: int = Field(ge=1, description="Per GPU, as DescribeInstanceTypes reports it")
    architecture: Architecture
    nvlink_links_per_gpu: int = Field(ge=0, description="NVLink links expected up per GPU; 0 if none")
    nvlink_gbs: float | None = Field(
        None, gt=0, description="NVLink bandwidth per GPU in GB/s, both directions, as NVIDIA states it"
    )
    nvswitch: bool = Field(description="NVSwitch baseboard: fabric manager must run, same version as driver")
    peak_bf16_tflops: float = Field(gt=0, description="Dense bf16 tensor peak per GPU")
    source: list[str] = Field(min_length=1)

    @property
    def memory_gib(self) -> float:
        return round(self.memory_mib / 1024, 2)


class NetworkSpec(_Data):
    bandwidth_gbps: float = Field(gt=0, description="Line rate, Gbit/s (peak for 'up to' types)")
    efa_interfaces: int = Field(ge=0, description="Maximum EFA interfaces")
    network_cards: int = Field(ge=1)
    enis_max: int = Field(ge=1, description="Maximum network interfaces over all cards")
    infiniband_ports: int = Field(
        0, ge=0, description="Compute-fabric InfiniBand HCA ports (bare metal); 0: none"
    )
    infiniband_rate_gbps: float | None = Field(
        None, gt=0, description="Rate per compute port in Gb/s as ibstat/sysfs print it (400 NDR, 200 HDR)"
    )
    source: list[str] = Field(min_length=1)


class CpuTopology(_Judged):
    """Sockets x cores per socket x threads per core as the node's OS (and ``slurmd -C``) sees them.

    Slurm from 24.11 refuses GPUs whose NVML core affinity does not fall on socket boundaries
    (compatibility.yaml ``slurm_node_topology``), so GPU node lines carry these three figures."""

    sockets: int = Field(ge=1)
    cores_per_socket: int = Field(ge=1)
    threads_per_core: int = Field(ge=1)
    source: list[str] = Field(min_length=1)

    @property
    def vcpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core


class NcclThreshold(_Judged):
    """A floor for one collective, valid only at the stated message size and node count.

    ``backend`` gloo is the CPU path (container nodes): same collective, torch.distributed gloo."""

    backend: Literal["nccl", "gloo"] = "nccl"
    collective: Collective
    nodes: int = Field(ge=1)
    algorithm: Literal["Ring"] | None = Field(
        None, description="NCCL_ALGO the runner forces for this measurement; None: NCCL's own choice"
    )
    message_bytes: int = Field(ge=1)
    busbw_gbps_min: float = Field(gt=0, description="GB/s, nccl-tests busbw (in-place and out-of-place)")
    source: list[str] = Field(min_length=1)

    @property
    def key(self) -> str:
        return Thresholds.threshold_key(self.backend, self.collective, self.nodes)

    @property
    def size_key(self) -> str:
        """The key of the message size rows are judged at (validators SCHEMA.md)."""
        return self.key.replace(".busbw_gbps", ".message_bytes")


class Thresholds(_Judged):
    nccl: list[NcclThreshold] = Field(default_factory=list)
    matmul_tflops_min: float | None = Field(
        None, gt=0, description="bf16 dense, per GPU, large square matmul"
    )
    cpu_matmul_gflops_min: float | None = Field(
        None, gt=0, description="fp32 GFLOP/s floor for the CPU path (container nodes, no GPU)"
    )
    source: list[str] = Field(default_factory=list, description="Sources for the matmul floors")

    @staticmethod
    def threshold_key(kind: str, collective: str = "", nodes: int = 0) -> str:
        """The key a spec's ``certification.profiles.*.thresholds`` uses to override a floor.

        ``threshold_key("nccl", "all_reduce", 2)`` -> ``nccl.all_reduce.2node.busbw_gbps``;
        ``threshold_key("gloo", "all_reduce", 1)`` -> ``gloo.all_reduce.1node.busbw_gbps``;
        ``threshold_key("matmul")`` -> ``matmul.tflops_min``;
        ``threshold_key("cpu_matmul")`` -> ``matmul.cpu_gflops_min``.
        """
        if kind in ("nccl", "gloo"):
            return f"{kind}.{collective}.{nodes}node.busbw_gbps"
        if kind == "matmul":
            return "matmul.tflops_min"
        if kind == "cpu_matmul":
            return "matmul.cpu_gflops_min"
        raise ValueError(f"unknown threshold kind {kind!r}")

    def values(self) -> dict[str, float]:
        """Every figure of this type by override key: floors, and the message size of each
        collective floor (``...message_bytes``)."""
        out: dict[str, float] = {}
        for t in self.nccl:
            out[t.key] = t.busbw_gbps_min
            out[t.size_key] = float(t.message_bytes)
        if self.matmul_tflops_min is not None:
            out[self.threshold_key("matmul")] = self.matmul_tflops_min
        if self.cpu_matmul_gflops_min is not None:
            out[self.threshold_key("cpu_matmul")] = self.cpu_matmul_gflops_min
        return out

    def with_overrides(self, overrides: dict[str, float]) -> dict[str, float]:
        """Catalogue floors with a profile's overrides applied (unknown keys are the checks' job)."""
        merged = self.values()
        merged.update({k: v for k, v in overrides.items() if k in merged})
        return merged


class CommonThresholds(_Judged):
    """Keys that apply to every type (validators SCHEMA.md), with defaults or none."""

    values: dict[str, float] = Field(default_factory=dict)
    optional: list[str] = Field(default_factory=list, description="Keys with no default: reported unless set")
    source: list[str] = Field(min_length=1)


class MetricGaps(BaseModel):
    """One metric's own gaps inside a type's ``fleet`` block (a metric noisier than the rest)."""

    model_config = ConfigDict(extra="forbid")
    warn_gap_pct: float = Field(gt=0, lt=100)
    fail_gap_pct: float = Field(gt=0, lt=100)

    @model_validator(mode="after")
    def _ordered(self) -> MetricGaps:
        if self.warn_gap_pct >= self.fail_gap_pct:
            raise ValueError(
                f"warn_gap_pct {self.warn_gap_pct} must be under fail_gap_pct {self.fail_gap_pct}"
            )
        return self


class FleetRules(_Judged):
    """How far under the fleet reference a node's figure may fall (clusterforge/certify/fleet/judge.py).

    Gaps are percent of the reference (this run's median for the type, or the stored baseline);
    ``z_warn`` applies the robust z-score 0.6745 (x - median) / MAD, only with enough nodes.
    ``metrics`` gives named metrics (fleet metric names) their own gaps."""

    warn_gap_pct: float = Field(gt=0, lt=100, description="% under the reference that warns")
    fail_gap_pct: float = Field(gt=0, lt=100, description="% under the reference that fails")
    z_warn: float = Field(gt=0, description="warn when the robust z is at or under -z_warn")
    metrics: dict[str, MetricGaps] = Field(default_factory=dict)
    source: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> FleetRules:
        if self.warn_gap_pct >= self.fail_gap_pct:
            raise ValueError(
                f"warn_gap_pct {self.warn_gap_pct} must be under fail_gap_pct {self.fail_gap_pct}"
            )
        return self


class ContainerShare(_Judged):
    """How a container type divides this machine among a stack's nodes (the local provider).

    A real node has its own processors; container nodes share this machine's, so each gets a fixed
    share: every compute node the same CPU quota, the machine's cores less ``head_cpus`` per head
    (or login) node and ``workstation_cpus`` for the machine's own work (Ansible, invoke, the
    engine), divided by the compute nodes; with a whole core or more each, whole cores of its own
    too (a cpuset). Memory: the type's ``memory_mib`` per compute node, ``head_memory_mib`` per
    head. clusterforge/providers/local/share.py computes it."""

    head_cpus: float = Field(gt=0, description="CPU quota of a head or login node (slurmctld, munge)")
    head_memory_mib: int = Field(ge=256, description="Memory limit of a head or login node")
    workstation_cpus: float = Field(ge=0, description="Cores left to this machine's own work")
    min_cpus: float = Field(gt=0, description="A compute share under this is refused at preflight")
    source: list[str] = Field(min_length=1)


class InstanceType(_Data):
    name: str
    provider: Literal["aws", "local", "static"]  # static: a bare-metal system (a static spec picks it)
    vcpus: int = Field(ge=1)
    memory_mib: int = Field(ge=1)
    container: bool = Field(False, description="The `local` container node: no GPU, no EFA")
    gpu: GpuSpec | None = None
    cpu: CpuTopology | None = Field(None, description="CPU topology (Slurm node lines); None: not known")
    network: NetworkSpec
    thresholds: Thresholds = Thresholds()
    fleet: FleetRules | None = Field(None, description="Fleet-judging gaps; None: fleet_defaults")
    share: ContainerShare | None = Field(
        None, description="Container types: each node's share of the machine"
    )
    source: list[str] = Field(min_length=1, description="Sources for vcpus and memory")
    note: str = ""

    @model_validator(mode="after")
    def _cpu_adds_up(self) -> InstanceType:
        if self.cpu is not None and self.cpu.vcpus != self.vcpus:
            raise ValueError(
                f"{self.name}: cpu {self.cpu.sockets} sockets x {self.cpu.cores_per_socket} cores x "
                f"{self.cpu.threads_per_core} threads = {self.cpu.vcpus}, not vcpus {self.vcpus}"
            )
        return self

    @model_validator(mode="after")
    def _share_for_containers(self) -> InstanceType:
        if self.container != (self.share is not None):
            raise ValueError(
                f"{self.name}: a container type needs a 'share' block (how it divides the machine), "
                "and only a container type may have one"
            )
        return self

    @property
    def memory_gib(self) -> float:
        return round(self.memory_mib / 1024, 2)

    @property
    def has_efa(self) -> bool:
        return self.network.efa_interfaces > 0

    @property
    def gpu_count(self) -> int:
        return self.gpu.count if self.gpu else 0


def line_rate_per_direction(it: InstanceType) -> float:
    """The network line rate of one node per direction in GB/s (``bandwidth_gbps`` / 8)."""
    return it.network.bandwidth_gbps / 8


def busbw_bound(it: InstanceType, collective: str, nodes: int) -> float | None:
    """The highest NCCL busbw (GB/s) the hardware allows for a floor's collective at ``nodes`` nodes,
    or None where busbw is not bounded by a link rate (all_reduce with NVLink SHARP in one node).

    nccl-tests doc/PERFORMANCE.md defines busbw so that it reflects the bottleneck link. In one node
    that is the GPU's NVLink per direction. Across nodes under Ring (the runner forces it at 2 nodes),
    each node's NICs carry busbw per direction, so busbw <= L (and <= NVLink). alltoall sends every
    rank's (n-g)/n share off its node: busbw = algbw (n-1)/n <= L (n-1) / (g (n-g)), n ranks, g per node.
    """
    if it.gpu is None:
        return None
    nvlink = it.gpu.nvlink_gbs / 2 if it.gpu.nvlink_gbs else None
    if nodes == 1:
        return None if collective == "all_reduce" else nvlink
    rate = line_rate_per_direction(it)
    if collective == "alltoall":
        g = it.gpu.count
        n = nodes * g
        return rate * (n - 1) / (g * (n - g))
    return min(rate, nvlink) if nvlink else rate


class Provenance(NamedTuple):
    """Where one figure (or group of figures) comes from: ``where`` names it in the YAML."""

    where: str
    source: list[str]
    estimate: bool
    note: str


class HardwareCatalog(_Data):
    sources: dict[str, str] = Field(description="Source id -> citation (URL and what it shows)")
    common_thresholds: CommonThresholds
    fleet_defaults: FleetRules
    instance_types: dict[str, InstanceType]

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: dict) -> dict:
        # The YAML keys are the names; copy them in so each InstanceType knows its own.
        types = data.get("instance_types", {}) if isinstance(data, dict) else {}
        for name, body in types.items():
            if isinstance(body, dict):
                body.setdefault("name", name)
        return data

    @model_validator(mode="after")
    def _sources_declared(self) -> HardwareCatalog:
        for ref in self.common_thresholds.source:
            if ref not in self.sources:
                raise ValueError(f"common_thresholds: source id {ref!r} is not declared under 'sources'")
        for ref in self.fleet_defaults.source:
            if ref not in self.sources:
                raise ValueError(f"fleet_defaults: source id {ref!r} is not declared under 'sources'")
        for it in self.instance_types.values():
            for ref in _source_refs(it):
                if ref not in self.sources:
                    raise ValueError(f"{it.name}: source id {ref!r} is not declared under 'sources'")
        return self

    def provenance(self) -> list[Provenance]:
        """Every sourced section of the catalogue, sourced or estimate (tests audit this list)."""
        common = self.common_thresholds
        out = [Provenance("common_thresholds", common.source, common.estimate, common.note)]
        fleet = self.fleet_defaults
        out.append(Provenance("fleet_defaults", fleet.source, fleet.estimate, fleet.note))
        for it in self.instance_types.values():
            base = f"instance_types.{it.name}"
            out.append(Provenance(base, it.source, False, it.note))
            if it.fleet is not None:
                out.append(Provenance(f"{base}.fleet", it.fleet.source, it.fleet.estimate, it.fleet.note))
            if it.share is not None:
                out.append(Provenance(f"{base}.share", it.share.source, it.share.estimate, it.share.note))
            out.append(Provenance(f"{base}.network", it.network.source, False, ""))
            if it.gpu:
                out.append(Provenance(f"{base}.gpu", it.gpu.source, False, ""))
            if it.cpu:
                out.append(Provenance(f"{base}.cpu", it.cpu.source, it.cpu.estimate, it.cpu.note))
            th = it.thresholds
            if th.matmul_tflops_min is not None or th.cpu_matmul_gflops_min is not None:
                out.append(Provenance(f"{base}.thresholds", th.source, th.estimate, th.note))
            for t in th.nccl:
                out.append(Provenance(f"{base}.thresholds.{t.key}", t.source, t.estimate, t.note))
        return out

    def estimates(self) -> list[Provenance]:
        """The figures no source states outright; each note says how it was derived."""
        return [p for p in self.provenance() if p.estimate]

    def thresholds_for(self, name: str) -> dict[str, float]:
        """Everything a node of this type is judged against: its own figures and the common ones."""
        return {**self.common_thresholds.values, **self.instance_types[name].thresholds.values()}

    def threshold_keys(self, name: str) -> list[str]:
        """Keys a spec may override for this type (including keys with no default)."""
        return sorted({*self.thresholds_for(name), *self.common_thresholds.optional})

    def fleet_rules(self, name: str) -> FleetRules:
        """The fleet-judging gaps of a type: its own ``fleet`` block, else ``fleet_defaults``."""
        it = self.instance_types.get(name)
        return it.fleet if it is not None and it.fleet is not None else self.fleet_defaults

    def get(self, name: str) -> InstanceType | None:
        return self.instance_types.get(name)

    def __getitem__(self, name: str) -> InstanceType:
        return self.instance_types[name]

    def __contains__(self, name: object) -> bool:
        return name in self.instance_types

    def names(self, provider: str | None = None) -> list[str]:
        return sorted(
            n for n, it in self.instance_types.items() if provider is None or it.provider == provider
        )


def _source_refs(it: InstanceType) -> list[str]:
    refs = list(it.source) + list(it.network.source) + list(it.thresholds.source)
    if it.gpu:
        refs += it.gpu.source
    if it.cpu:
        refs += it.cpu.source
    for t in it.thresholds.nccl:
        refs += t.source
    if it.fleet is not None:
        refs += it.fleet.source
    if it.share is not None:
        refs += it.share.source
    return refs


def read_hardware(path: Path) -> HardwareCatalog:
    """Parse one catalogue file (tests use this on altered copies)."""
    return HardwareCatalog.model_validate(strict_yaml.load_file(path))


@cache
def load_hardware() -> HardwareCatalog:
    """The packaged hardware catalogue, parsed once per process."""
    return read_hardware(HARDWARE_FILE)
