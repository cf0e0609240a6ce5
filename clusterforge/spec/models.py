"""The cluster spec: one source of truth for everything that differs between clusters.

Models are strict (``extra="forbid"``): an unknown key is an error, never silently ignored.
Only schema-level rules live here; rules that need the catalogues live in
``clusterforge.spec.checks`` so that every semantic error can be reported at once.
"""

from __future__ import annotations

import re
from ipaddress import IPv4Network
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clusterforge.spec.health import Health

SPEC_VERSION: Literal[1] = 1

_NAME = r"^[a-z][a-z0-9-]{0,30}$"
_VERSION = r"^\d+(\.\d+){0,3}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Version = Annotated[str, Field(pattern=_VERSION, description="Dotted version, e.g. 570.133.20")]


# --- provider -------------------------------------------------------------------------------


class AwsProvider(_Strict):
    """AWS through the Pulumi program in ``stacks/``."""

    kind: Literal["aws"]
    region: str = Field(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$", description="e.g. us-east-1")
    availability_zone: str = Field(description="GPU capacity lives in one AZ, e.g. us-east-1a")
    admin_cidrs: list[IPv4Network] = Field(
        default_factory=list,
        description="CIDRs allowed to SSH to the head node. Empty (default): SSM only, no SSH ingress.",
    )
    egress: Literal["nat", "endpoints"] = Field(
        "nat", description="nat: NAT gateway; endpoints: VPC endpoints only (S3 gateway, SSM interfaces)"
    )
    connection: Literal["ssm", "ssh-bastion"] = Field(
        "ssm", description="How Ansible reaches the nodes: SSM Session Manager or SSH via a bastion"
    )
    ami: str | None = Field(
        None,
        pattern=r"^ami-[0-9a-f]{8,17}$",
        description="Pin an AMI. Unset: the SSM public parameter, read once and recorded in the stack "
        "config (clusterforge:ami) so a new AMI release never replaces nodes",
    )
    ami_prebaked: bool = Field(
        False,
        description="provider.ami already carries the spec's software (built from the roles): needed for "
        "egress: endpoints, where nodes cannot reach package repositories",
    )
    key_name: str | None = Field(None, description="EC2 key pair for ssh-bastion connections")


class LocalProvider(_Strict):
    """Containers on this machine: no cloud, no GPU."""

    kind: Literal["local"]
    engine: Literal["auto", "podman", "docker"] = Field(
        "auto", description="Container engine; auto prefers podman, then docker"
    )
    debian_suite: Literal["bookworm"] = "bookworm"
    network_cidr: IPv4Network = Field(IPv4Network("10.89.42.0/24"), description="Private container network")


class StaticSsh(_Strict):
    """How clusterforge and Ansible reach existing machines; a host's own ``ansible_user``,
    ``ansible_port``, ``ansible_ssh_private_key_file``, ``ansible_become`` and
    ``clusterforge_ssh_jump_host`` in the inventory win over these defaults."""

    user: str | None = Field(
        None, description="SSH user. Unset: the inventory's ansible_user, else your login name"
    )
    private_key: str | None = Field(
        None,
        description="Private key file (relative to the repository root or absolute). Unset: ssh's own keys/agent",
    )
    port: int = Field(22, ge=1, le=65535)
    jump_host: str | None = Field(
        None,
        pattern=r"^([A-Za-z0-9._-]+@)?[A-Za-z0-9._-]+(:\d{1,5})?$",
        description="[user@]host[:port] every connection goes through (checked against the same known hosts)",
    )
    become: bool = Field(
        True, description="Use sudo on the hosts (needed unless user is root); checked at preflight"
    )
    host_keys: Literal["known-hosts", "trust-on-first-use"] = Field(
        "known-hosts",
        description="known-hosts: every host key must already be in known_hosts (StrictHostKeyChecking=yes); "
        "trust-on-first-use: a host never seen is recorded on first contact (accept-new), a changed key still fails",
    )
    known_hosts: str | None = Field(
        None,
        description="known_hosts file the host keys are checked against (and recorded in, for trust-on-first-use). "
        "Unset: ssh's own (~/.ssh/known_hosts)",
    )


class StaticProvider(_Strict):
    """Existing machines, from a hand-written Ansible inventory."""

    kind: Literal["static"]
    inventory: str = Field(description="Path to the inventory file, relative to the repository root")
    ssh: StaticSsh = StaticSsh()


Provider = Annotated[AwsProvider | LocalProvider | StaticProvider, Field(discriminator="kind")]


# --- node pools -----------------------------------------------------------------------------


class RootVolume(_Strict):
    size_gib: int = Field(200, ge=8, le=16384)
    type: Literal["gp3", "io1", "io2"] = Field("gp3", description="io1/io2 need iops")
    iops: int | None = Field(None, ge=3000, le=256000)
    throughput_mibps: int | None = Field(None, ge=125, le=1000)


class PlacementGroup(_Strict):
    strategy: Literal["cluster", "partition"] = "cluster"
    partition_count: int | None = Field(None, ge=1, le=7)
    name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9._-]{1,255}$",
        description="An existing placement group to launch into (e.g. the one a capacity reservation was made "
        "in); the stack then creates none. Unset: the stack creates <stack>-<pool>",
    )


class CpuTopology(_Strict):
    """A node's CPU layout as ``slurmd -C`` prints it; Slurm >= 24.11 needs it on GPU nodes
    (compatibility.yaml slurm_node_topology) where the hardware catalogue has none."""

    sockets: int = Field(ge=1)
    cores_per_socket: int = Field(ge=1)
    threads_per_core: int = Field(ge=1)


class NodePool(_Strict):
    name: str = Field(pattern=_NAME)
    role: Literal["gpu", "head", "login"] = Field(description="gpu: training workers; head: Slurm controller")
    instance_type: str = Field(description="A key of the hardware catalogue, e.g. p5.48xlarge")
    count: int = Field(ge=0, le=4096)
    capacity_reservation_id: str | None = Field(None, pattern=r"^cr-[0-9a-f]{8,17}$")
    capacity_block_id: str | None = Field(
        None, pattern=r"^cr-[0-9a-f]{8,17}$", description="A purchased EC2 Capacity Block (a cr- id)"
    )
    capacity_reservation_size: int | None = Field(
        None, ge=1, description="Instances the reservation holds; checked against count (preflight confirms)"
    )
    placement_group: PlacementGroup | None = None
    launch_template_version: int | None = Field(
        None,
        ge=1,
        description="Launch template version the pool's nodes run. Unset: each node keeps the version it was "
        "created with, so a template change replaces nothing; set it to roll the pool onto that version",
    )
    root_volume: RootVolume = RootVolume()
    certification: str | None = Field(None, description="Name of a certification profile")
    cpu_topology: CpuTopology | None = Field(
        None,
        description="Sockets, cores per socket and threads per core of the instance type, from `slurmd -C` on one "
        "node; unset: the hardware catalogue's (Slurm >= 24.11 refuses GPU nodes without one)",
    )
    image: Literal["base", "baked"] = Field(
        "base",
        description="base: boot the OS image and converge the node software on every node; baked: boot the "
        "image `invoke image.bake` built for this pool (node software installed and checked once), so nodes "
        "run only the cluster part at boot. A baked image that no longer fits the spec is said by `plan`; "
        "its nodes then converge in full",
    )


# --- network and storage ----------------------------------------------------------------------


class Subnets(_Strict):
    gpu: IPv4Network = IPv4Network("10.0.0.0/19")
    head: IPv4Network = IPv4Network("10.0.32.0/24")
    public: IPv4Network | None = Field(IPv4Network("10.0.33.0/24"), description="For the NAT gateway")


class Network(_Strict):
    vpc_cidr: IPv4Network = IPv4Network("10.0.0.0/16")
    subnets: Subnets = Subnets()


class FsxLustre(_Strict):
    storage_capacity_gib: int = Field(ge=1200, description="1200, 2400, then steps of 2400 (PERSISTENT_2)")
    deployment_type: Literal["SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = "PERSISTENT_2"
    per_unit_storage_throughput: int | None = Field(None, description="MB/s per TiB (PERSISTENT only)")
    mount_point: str = "/fsx"
    import_path: str | None = Field(None, pattern=r"^s3://", description="Optional S3 data repository")
    backup_on_destroy: bool = Field(
        True, description="`invoke down` backs the file system up before destroying it (PERSISTENT types)"
    )
    automatic_backup_retention_days: int = Field(
        7,
        ge=0,
        le=90,
        description="Days FSx keeps its daily automatic backups (PERSISTENT types; 0 switches them off)",
    )


class CheckpointBucket(_Strict):
    name: str | None = Field(
        None, pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", description="Default: derived"
    )
    noncurrent_version_expiry_days: int = Field(30, ge=1)


class LocalScratch(_Strict):
    """The nodes' local NVMe instance-store disks striped (RAID0) into one scratch filesystem
    (roles/local_scratch); its data lives only as long as the instance."""

    mount_point: str = Field("/scratch", pattern=r"^/[^\s]*$")
    filesystem: Literal["xfs", "ext4"] = "xfs"


class SharedVolume(_Strict):
    name: str = Field("shared", pattern=_NAME)
    mount_point: str = "/shared"


class Nfs(_Strict):
    server: str
    export: str
    mount_point: str = "/shared"


class Storage(_Strict):
    fsx_lustre: FsxLustre | None = None
    checkpoint_bucket: CheckpointBucket | None = None
    shared_volume: SharedVolume | None = Field(None, description="local provider: a container volume")
    nfs: Nfs | None = Field(None, description="static provider: an existing NFS export")
    local_scratch: LocalScratch | None = Field(
        None, description="aws/static: the nodes' NVMe instance-store disks as one RAID0 at mount_point"
    )

    @property
    def shared_path(self) -> str | None:
        """Where every node sees shared storage (checkpoints, validator scratch)."""
        for item in (self.fsx_lustre, self.shared_volume, self.nfs):
            if item is not None:
                return item.mount_point
        return None


# --- software set ---------------------------------------------------------------------------


class Driver(_Strict):
    branch: str = Field(pattern=r"^\d{3}$", description="Driver branch, e.g. 570")
    version: Version
    kernel_module: Literal["open", "proprietary"] = "open"
    source: Literal["cuda-repo", "distro"] = Field(
        "cuda-repo", description="cuda-repo: NVIDIA's CUDA network repository; distro: e.g. Debian non-free"
    )


class SlurmInstall(_Strict):
    """How the slurm role puts software.slurm on the nodes (role inputs ``slurm_install_method``,
    ``slurm_source_url``, ``slurm_source_sha256``)."""

    method: Literal["package", "source"] = Field(
        "package",
        description="package: the OS's slurm-wlm packages, pinned and held (Debian 12: 22.05.8, Ubuntu 22.04: "
        "21.08.5, 24.04: 23.11.4 only); source: SchedMD's release tarball, sha256-verified, built once per "
        "version/OS/architecture and copied to every node",
    )
    source_url: str | None = Field(
        None,
        pattern=r"^(https?|file)://\S+$",
        description="source: the release tarball; unset: https://download.schedmd.com/slurm/slurm-<slurm>.tar.bz2",
    )
    sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="source: sha256 of the tarball (64 lowercase hex), checked before unpacking; the role "
        "refuses to build without it",
    )


class TorchPin(_Strict):
    """The PyTorch the validators' GPU workloads use (roles/validators_runtime installs it)."""

    version: Version = Field(description="PyTorch release, e.g. 2.13.0")
    cuda: str | None = Field(
        None,
        pattern=r"^\d+\.\d+$",
        description="CUDA variant of the build, e.g. 12.6 (the +cu126 wheel); default: the newest "
        "the driver and GPUs run (compatibility.yaml torch)",
    )


class Software(_Strict):
    os_image: Literal["ubuntu-22.04", "ubuntu-24.04", "debian-12"]
    driver: Driver
    cuda: Version = Field(description="CUDA toolkit version, e.g. 12.8.1")
    nccl: Version | None = Field(None, description="e.g. 2.26.2 (package 2.26.2-1+cuda12.8)")
    nccl_tests: Version | None = None
    efa_installer: Version | None = None
    efa_installer_sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="SHA-256 of aws-efa-installer-<efa_installer>.tar.gz (AWS's checksum table); the role also "
        "checks AWS's GPG signature, with or without it",
    )
    aws_ofi_nccl: Version | None = None
    fabric_manager: Version | None = Field(None, description="Must equal driver.version on NVSwitch types")
    dcgm: Version | None = None
    dcgm_exporter: Version | None = Field(
        None,
        description="dcgm-exporter's own version, not DCGM's, e.g. 4.1.3 (released paired with DCGM 4.2.3)",
    )
    nvidia_container_toolkit: Version | None = None
    enroot: Version | None = None
    pyxis: Version | None = None
    torch: TorchPin | None = Field(
        None,
        description="PyTorch for the validators' GPU checks; default: compatibility.yaml's torch "
        "default_version in the CUDA variant the driver runs",
    )
    slurm: Version
    slurm_install: SlurmInstall = Field(
        default_factory=SlurmInstall,
        description="How Slurm is installed: distribution packages or built from source",
    )


# --- orchestration and certification --------------------------------------------------------


class Partition(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,30}$")
    pools: list[str] = Field(min_length=1)
    default: bool = False
    max_time: str = Field("INFINITE", pattern=r"^(INFINITE|\d+(-\d{1,2})?(:\d{2}){0,2})$")


class Orchestration(_Strict):
    scheduler: Literal["slurm"] = "slurm"
    partitions: list[Partition] = Field(min_length=1)


class Durations(_Strict):
    burnin_seconds: int = Field(60, ge=5, le=86400)
    nccl_iterations: int = Field(20, ge=1, le=1000)
    checkpoint_steps: int = Field(8, ge=2, le=10000)


# nccl-tests benchmarks the validators can run (validators/config.py _COLLECTIVES).
NcclCollective = Literal[
    "all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"
]


class CertificationProfile(_Strict):
    suite: Literal["quick", "standard", "full"] = Field(description="validators profile to run")
    skip_checks: list[str] = Field(default_factory=list, description="validator check ids not to run")
    durations: Durations = Durations()
    thresholds: dict[str, float] = Field(
        default_factory=dict,
        description="Overrides of catalogue thresholds, by key, e.g. nccl.all_reduce.1node.busbw_gbps; "
        "fleet-judging gaps as fleet.warn_gap_pct, fleet.<metric>.fail_gap_pct, fleet.z_warn",
    )
    baseline_across_versions: bool = Field(
        False,
        description="Judge against a stored baseline recorded with other software versions than the spec's "
        "(the verdict says so); default: such a baseline is not applied",
    )
    checkpoint_mib: int | None = Field(
        None,
        ge=1,
        le=1048576,
        description="Size of the checkpoint-restart checkpoint per rank in MiB; default: 256 on container "
        "nodes, 1/16 of one GPU's memory on GPU types (large enough that its rates measure the storage)",
    )
    multi_node_collectives: list[NcclCollective] | None = Field(
        None,
        min_length=1,
        description="nccl-tests collectives the GPU network check runs across each group of nodes, each judged "
        "against its own reference (NODE.json nccl.multi_node_collectives); default: all_reduce on the quick "
        "suite, all_reduce, all_gather and alltoall on standard and full. The first is the one the stored "
        "network baseline holds",
    )
    gloo_sweep_mib: list[Annotated[int, Field(ge=1, le=4096)]] | None = Field(
        None,
        description="Message sizes in MiB that gloo-allreduce (container nodes) measures besides the judged one, "
        "for the report's bandwidth-against-message-size plot (never judged); default: the validators "
        "profile's (quick 1, 4, 16, 64; standard and full up to 256); [] measures the judged size alone",
    )

    @field_validator("multi_node_collectives")
    @classmethod
    def _once_each(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError(f"multi_node_collectives: {value} names a collective twice; list each once")
        return value


class Certification(_Strict):
    profiles: dict[str, CertificationProfile] = Field(default_factory=dict)

    @field_validator("profiles")
    @classmethod
    def _names(cls, value: dict[str, CertificationProfile]) -> dict[str, CertificationProfile]:
        for name in value:
            if not re.match(_NAME, name):
                raise ValueError(f"profile name {name!r} must match {_NAME}")
        return value


# --- changing a running cluster --------------------------------------------------------------


class Rollout(_Strict):
    """How a change reaches nodes in service: in batches, each drained, converged, re-certified, resumed."""

    max_unavailable: int | str = Field(
        1,
        description="Most nodes of one pool out of service at once (a count, or a percentage of the pool such "
        "as '10%', rounded down, at least 1); it is also the batch size",
    )
    drain_timeout_s: int = Field(
        3600, ge=0, le=7 * 86400, description="How long running jobs may take to finish after the drain"
    )
    on_drain_timeout: Literal["stop", "skip", "requeue"] = Field(
        "stop",
        description="Jobs still running at the timeout: stop the rollout (the node is resumed untouched), skip "
        "the node (resumed untouched, left on the old version) or requeue its jobs and upgrade it",
    )
    on_failure: Literal["stop", "continue"] = Field(
        "stop",
        description="A node of a batch fails to converge, reboot or re-certify: stop after that batch, or go on "
        "with the next; failed nodes stay drained with the reason either way",
    )

    @field_validator("max_unavailable", mode="before")
    @classmethod
    def _count_or_percent(cls, value: int | str) -> int | str:
        if isinstance(value, bool):
            ok = False  # YAML's true/false are not counts
        elif isinstance(value, int):
            ok = value >= 1
        else:
            ok = isinstance(value, str) and bool(re.fullmatch(r"([1-9]\d?|100)%", value))
        if not ok:
            raise ValueError(
                f"max_unavailable {value!r}: give a count of at least 1 or a percentage from 1% to 100%"
            )
        return value


# --- where the cluster's state lives --------------------------------------------------------

_S3_URL = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9!_.*'()/-]*)?$")


class State(_Strict):
    """Where the stack's journal, baselines, reports and lock live: one place every runner reaches."""

    backend: str = Field(
        "local",
        description="local (the .clusterforge/<stack>/ folder of the machine that runs the command; the default), "
        "s3://bucket/prefix (cloud stacks, CI runners), or an absolute path every runner mounts (the head "
        "node's or a shared filesystem's, for static clusters; file:///path also works)",
    )
    lease_s: int = Field(
        300,
        ge=10,
        le=86400,
        description="Lease of the stack lock in a shared backend: a command renews it every third of this; a "
        "lock whose holder died is taken over once its lease ran out",
    )
    region: str | None = Field(
        None,
        pattern=r"^[a-z]{2}(-gov)?-[a-z]+-\d$",
        description="Region of the S3 bucket (default: the aws provider's region, else the AWS configuration's)",
    )

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str) -> str:
        if value == "local":
            return value
        if value.startswith("s3://"):
            if not _S3_URL.match(value):
                raise ValueError(
                    f"backend {value!r}: an S3 backend is s3://BUCKET/PREFIX with a valid bucket name "
                    "(lower-case letters, digits, dots and hyphens, 3-63 characters)"
                )
            return value
        path = value[len("file://") :] if value.startswith("file://") else value
        if not path.startswith("/"):
            raise ValueError(
                f"backend {value!r}: give local, s3://BUCKET/PREFIX, or an absolute path every runner mounts "
                "(e.g. /shared/clusterforge-state)"
            )
        return value


# --- configuring many nodes ------------------------------------------------------------------


class AnsibleSettings(_Strict):
    """How the workstation drives Ansible (clusterforge/ansible/scale.py)."""

    forks: int | None = Field(
        None,
        ge=1,
        le=4096,
        description="Hosts Ansible works on at once. Unset: 16 per workstation CPU (at least 10), "
        "never above max_forks",
    )
    max_forks: int = Field(
        128,
        ge=1,
        le=4096,
        description="Upper bound on forks (each is a Python process on the workstation, tens of MB)",
    )
    fact_cache_timeout_s: int = Field(
        86400,
        ge=0,
        le=30 * 86400,
        description="How long gathered facts are reused (jsonfile cache under the stack's state); 0 never expires",
    )


# --- workload benchmark (invoke benchmark) ----------------------------------------------------


class BenchmarkTrain(_Strict):
    """The training workload's sizes; unset keys come from the node type's preset
    (clusterforge/benchmark/sizing.py: a few MB of parameters on container nodes, a few hundred MB
    on GPU nodes)."""

    vocab: int | None = Field(None, ge=16, le=1_048_576)
    d_model: int | None = Field(None, ge=8, le=65536)
    layers: int | None = Field(None, ge=1, le=1024)
    heads: int | None = Field(None, ge=1, le=1024)
    seq_len: int | None = Field(None, ge=8, le=1_048_576)
    micro_batch: int | None = Field(None, ge=1, le=65536, description="Sequences per rank per step")
    steps: int | None = Field(None, ge=2, le=100_000, description="Measured steps (after the warm-up)")
    warmup_steps: int | None = Field(None, ge=1, le=10_000, description="Steps run first and not measured")
    checkpoint_every: int | None = Field(
        None, ge=0, le=100_000, description="Save a checkpoint every N measured steps (0: never)"
    )
    loader_workers: int | None = Field(None, ge=0, le=256, description="DataLoader processes per rank")
    threads: int | None = Field(
        None, ge=0, le=1024, description="torch threads per rank on CPU nodes (0: torch's default)"
    )


class BenchmarkInfer(_Strict):
    batch_sizes: list[Annotated[int, Field(ge=1, le=65536)]] | None = Field(None, min_length=1)
    prompt_tokens: int | None = Field(None, ge=1, le=1_048_576)
    new_tokens: int | None = Field(None, ge=1, le=1_048_576)
    repeats: int | None = Field(None, ge=1, le=1000, description="Batches per batch size (latency samples)")


class BenchmarkData(_Strict):
    sample_kib: int | None = Field(
        None, ge=4, le=1_048_576, description="Bytes of one sample on storage, in KiB (a multiple of 4)"
    )
    shards: int | None = Field(None, ge=1, le=100_000)
    samples_per_shard: int | None = Field(None, ge=1, le=10_000_000)
    workers: list[Annotated[int, Field(ge=1, le=1024)]] | None = Field(
        None, min_length=1, description="Reader process counts the loader sweep measures"
    )
    seconds: float | None = Field(None, gt=0, le=3600, description="How long each reader count reads")

    @field_validator("sample_kib")
    @classmethod
    def _whole_blocks(cls, value: int | None) -> int | None:
        if value is not None and value % 4:
            raise ValueError(
                f"sample_kib {value}: give a multiple of 4 (reads bypass the page cache in 4 KiB blocks)"
            )
        return value


class Benchmark(_Strict):
    """`invoke benchmark`: workload sizes and the gates a run must pass (exit 1 when one fails)."""

    min_scaling_efficiency: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Gate: training's scaling efficiency against one node, at every node count",
    )
    min_mfu: float | None = Field(None, gt=0, le=1, description="Gate: model FLOP utilisation (GPU nodes)")
    fail_on_regression: bool = Field(
        False, description="Gate: a figure more than regression_pct under the last comparable run fails"
    )
    regression_pct: float = Field(
        10,
        gt=0,
        lt=100,
        description="How far under the last comparable run a figure must be to be named a regression",
    )
    slow_rank_gap_pct: float = Field(
        25,
        gt=0,
        le=1000,
        description="A rank whose own time per step is this far over its peers' is the slow rank",
    )
    limit_share_pct: float = Field(
        15,
        gt=0,
        lt=100,
        description="A part other than compute names the limit once it takes this share of the step",
    )
    time_limit_min: int = Field(15, ge=1, le=1440, description="Slurm time limit of each benchmark job")
    container_image: str | None = Field(
        None,
        description="Run the workloads in this image through pyxis (srun --container-image) where the cluster "
        "has it (software.pyxis); unset: on the nodes' own Python",
    )
    train: BenchmarkTrain = BenchmarkTrain()
    infer: BenchmarkInfer = BenchmarkInfer()
    data: BenchmarkData = BenchmarkData()


# --- the spec -------------------------------------------------------------------------------


class ClusterSpec(_Strict):
    """A cluster: where it runs, what it is made of, what runs on it and how it is certified."""

    spec_version: Literal[1] = SPEC_VERSION
    stack: str = Field(pattern=_NAME, description="Stack name; also names resources and the journal folder")
    provider: Provider
    node_pools: list[NodePool] = Field(min_length=1)
    network: Network = Network()
    storage: Storage = Storage()
    software: Software
    orchestration: Orchestration
    certification: Certification = Certification()
    rollout: Rollout = Rollout()
    state: State = State()
    ansible: AnsibleSettings = AnsibleSettings()
    benchmark: Benchmark = Benchmark()
    health: Health = Field(default_factory=Health, description="Version floors, strikes, remediation")
    suppress_checks: list[str] = Field(default_factory=list, description="Spec check ids to silence")

    def pool(self, name: str) -> NodePool:
        for pool in self.node_pools:
            if pool.name == name:
                return pool
        raise KeyError(name)

    def pools_with_role(self, role: str) -> list[NodePool]:
        return [p for p in self.node_pools if p.role == role]

    def node_names(self, pool: NodePool) -> list[str]:
        """Stable node names, ``<pool>-001`` …, so one node can be replaced on its own."""
        return [f"{pool.name}-{i:03d}" for i in range(1, pool.count + 1)]
