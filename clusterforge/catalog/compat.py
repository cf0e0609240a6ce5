"""The software compatibility matrix: which versions work together, and on which GPUs.

Data lives in ``clusterforge/data/compatibility.yaml`` with a source for every rule; this module
gives it types, a cached loader and the look-ups the spec checks and the roles need. A rule no
source states outright is marked ``estimate: true`` with its reasoning in ``note``
(``CompatMatrix.estimates()`` lists them).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clusterforge import strict_yaml
from clusterforge.catalog.floors import SecurityFloors
from clusterforge.catalog.hardware import DATA_DIR, Provenance
from clusterforge.catalog.versions import at_least, major, major_minor, vtuple

COMPAT_FILE = DATA_DIR / "compatibility.yaml"

KernelModule = Literal["open", "proprietary"]
Level = Literal["error", "warning", "info"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: object) -> object:
        # YAML reads 535 as a number and 12.10 as the float 12.1: ints become text, floats are refused
        # so that a two-part version is always written quoted.
        if isinstance(value, list):
            return [cls._numbers_as_text(v) for v in value]
        if isinstance(value, float):
            raise ValueError(f"write the version {value!r} as a quoted string (YAML read it as a number)")
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _Sourced(_Data):
    """A rule with its sources; an estimate must explain itself in ``note``."""

    source: list[str] = Field(min_length=1)
    estimate: bool = Field(False, description="No source states it; the note says how it was derived")
    note: str = ""

    @model_validator(mode="after")
    def _estimate_explained(self) -> _Sourced:
        if self.estimate and not self.note.strip():
            raise ValueError("an estimate needs a note saying what it was derived from and why")
        return self


class CudaRelease(_Sourced):
    cuda: str = Field(description="Toolkit release major.minor.update: 12.8.1 is 12.8 Update 1")
    min_driver: str = Field(description="Minimum Linux x86_64 driver for the full toolkit")


class CudaMajor(_Sourced):
    major: str
    min_driver: str = Field(description="Floor under minor version compatibility (reduced features)")


class GpuModelRule(_Sourced):
    architecture: str
    min_cuda: str
    min_driver: str
    kernel_modules: list[KernelModule] = Field(min_length=1, description="Kernel module flavours that work")
    min_nccl: str | None = None


class KernelModuleRule(_Sourced):
    open_min_driver: str = Field(description="First driver branch shipping the open GPU kernel modules")


class DriverBranch(_Data):
    designation: str
    end_of_life: str = Field(pattern=r"^\d{4}-\d{2}$", description="YYYY-MM")


class DriverLifecycle(_Sourced):
    as_of: str = Field(pattern=r"^\d{4}-\d{2}$", description="When the branch list was read (YYYY-MM)")
    branches: dict[str, DriverBranch]
    others_end_of_life: bool = Field(description="Branches not listed were end of life on as_of")

    def ended(self, branch: str) -> str | None:
        """The end-of-life month if the branch had ended by ``as_of`` ("earlier" if unlisted), else None."""
        known = self.branches.get(branch)
        if known is None:
            return "before " + self.as_of if self.others_end_of_life else None
        return known.end_of_life if known.end_of_life <= self.as_of else None


class Nvlink5Rule(_Data):
    """What an NVLink5 (fifth-generation NVSwitch) baseboard needs beside Fabric Manager: the NVLink
    Subnet Manager and InfiniBand management tools, and ib_umad loaded (Fabric Manager's precheck
    talks to the NVSwitches through /dev/infiniband/umad*)."""

    architectures: list[str] = Field(min_length=1, description="GPU architectures with NVLink5, e.g. sm_100")
    packages: list[str] = Field(min_length=1, description="Installed at the repository's own versions")
    kernel_modules: list[str] = Field(min_length=1, description="Loaded at boot (modules-load.d)")


class FabricManagerRule(_Sourced):
    required_on_nvswitch: bool
    must_equal_driver: bool
    unbranched_from: int = Field(
        description="First branch whose packages drop the branch from their names (nvidia-fabricmanager)"
    )
    companions: list[str] = Field(
        description="Packages installed at the driver's exact version beside nvidia-fabricmanager"
    )
    nvsdm_from: int = Field(description="First branch that ships libnvsdm beside Fabric Manager (amd64 only)")
    nvlink5: Nvlink5Rule

    def package_names(self, branch: int, nvsdm: bool = True) -> list[str]:
        """nvidia-fabricmanager and its companions as the repository names them for ``branch``;
        ``nvsdm`` False leaves libnvsdm out (arm64 hosts, where NVIDIA publishes none)."""
        suffix = "" if branch >= self.unbranched_from else f"-{branch}"
        names = ["nvidia-fabricmanager", *self.companions]
        if nvsdm and branch >= self.nvsdm_from:
            names.append("libnvsdm")
        return [f"{name}{suffix}" for name in names]

    def is_nvlink5(self, architecture: str | None) -> bool:
        return architecture is not None and architecture in self.nvlink5.architectures


class NcclCudaRule(_Sourced):
    nccl_min: str
    nccl_below: str | None = Field(None, description="Exclusive upper bound; None: open ended")
    cuda_majors: list[str] = Field(min_length=1, description="CUDA majors NCCL packages are built for")

    def covers(self, nccl: str) -> bool:
        return at_least(nccl, self.nccl_min) and (
            self.nccl_below is None or not at_least(nccl, self.nccl_below)
        )


class AwsOfiNcclRule(_Sourced):
    """The oldest NCCL a range of aws-ofi-nccl releases works with (their release notes)."""

    aws_ofi_nccl_min: str
    aws_ofi_nccl_below: str | None = Field(None, description="Exclusive upper bound; None: open ended")
    nccl_min: str

    def covers(self, aws_ofi_nccl: str) -> bool:
        return at_least(aws_ofi_nccl, self.aws_ofi_nccl_min) and (
            self.aws_ofi_nccl_below is None or not at_least(aws_ofi_nccl, self.aws_ofi_nccl_below)
        )


class VersionFloor(_Data):
    """One component's floor on some instance types: below ``required`` is an error,
    below ``recommended`` a warning."""

    component: Literal["cuda", "nccl", "aws_ofi_nccl", "efa_installer", "driver"]
    required: str
    recommended: str | None = None


class InstanceFloors(_Sourced):
    instance_types: list[str] = Field(min_length=1)
    floors: list[VersionFloor] = Field(min_length=1)


class EfaEnvRule(_Sourced):
    """A combination that works only with an environment variable set (a known failure)."""

    id: str
    nccl_min: str
    efa_installer_below: str
    env: dict[str, str]
    level: Level
    message: str


class SlurmSupport(_Sourced):
    """SchedMD's policy: a family is supported for ``support_months`` after its release."""

    as_of: str = Field(pattern=r"^\d{4}-\d{2}$", description="When the flags were last judged (YYYY-MM)")
    support_months: int = Field(gt=0)

    @field_validator("support_months", mode="before")
    @classmethod
    def _months(cls, value: object) -> object:
        return int(value) if isinstance(value, str) else value

    def supported(self, released: str) -> bool:
        """Whether a family released in ``released`` (YYYY-MM) is still supported on ``as_of``."""
        year, month = (int(x) for x in released.split("-"))
        months = year * 12 + month - 1 + self.support_months
        end = f"{months // 12:04d}-{months % 12 + 1:02d}"
        return end > self.as_of


class SlurmFamily(_Sourced):
    released: str = Field(description="YYYY-MM")
    upstream_supported: bool


class PyxisRule(_Sourced):
    enroot_min: str


class DcgmCudaRule(_Sourced):
    """The first DCGM 4 release that ships datacenter-gpu-manager-4-cuda<cuda_major>."""

    cuda_major: str
    dcgm_min: str


class SlurmNodeTopologyRule(_Sourced):
    """From ``from_family`` on, GPU nodes need their CPU topology (``fields``) in slurm.conf."""

    from_family: str = Field(description="First Slurm family (YY.MM) with the socket-boundary check")
    fields: list[str] = Field(min_length=1, description="Node line fields that must be rendered")

    def applies(self, slurm: str) -> bool:
        return at_least(major_minor(slurm), self.from_family)


class OsImageRule(_Sourced):
    providers: dict[str, list[str]] = Field(description="provider kind -> os_image values it can build")
    efa_installer: list[str] = Field(description="os_image values the EFA installer supports")
    distro_driver_branch: dict[str, str] = Field(
        default_factory=dict, description="os_image -> driver branch its own archive carries (source: distro)"
    )


class FsxDeployment(_Data):
    capacity_gib: list[int] = Field(min_length=1, description="The first allowed sizes")
    capacity_step_gib: int = Field(gt=0, description="Allowed sizes continue in this step after the last")
    throughput_per_tib: list[int] = Field(description="Allowed PerUnitStorageThroughput; empty: not settable")

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_as_text(cls, value: object) -> object:
        return value  # these are numbers, not versions

    def capacity_ok(self, gib: int) -> bool:
        last = self.capacity_gib[-1]
        return gib in self.capacity_gib or (gib > last and (gib - last) % self.capacity_step_gib == 0)


class FsxRules(_Sourced):
    deployment_types: dict[str, FsxDeployment]


class TorchBuild(_Sourced):
    """One PyTorch wheel build: its CUDA release, where pip gets it, the GPU architectures it carries."""

    torch: str = Field(description="PyTorch release, e.g. 2.13.0")
    cuda: str = Field(pattern=r"^\d+\.\d+$", description="CUDA release the build is compiled for, e.g. 12.6")
    index_url: str = Field(pattern=r"^https://", description="pip index holding it (pip --index-url)")
    architectures: list[str] = Field(min_length=1, description="sm_XY the build has kernels for")
    experimental: bool = Field(False, description="PyTorch's experimental CUDA column: never picked unasked")
    pypi_default: bool = Field(False, description="PyPI's plain torch==<version> is this build")

    @property
    def label(self) -> str:
        """The local version label of the index's wheel: ``cu126``."""
        return "cu" + self.cuda.replace(".", "")

    @property
    def pin(self) -> str:
        """The exact version pip installs from the index: ``2.13.0+cu126``."""
        return f"{self.torch}+{self.label}"


class TorchRules(_Sourced):
    default_version: str = Field(description="torch a spec without software.torch gets")
    builds: list[TorchBuild] = Field(min_length=1)


class CompatMatrix(_Data):
    sources: dict[str, str]
    cuda_releases: list[CudaRelease]
    cuda_majors: list[CudaMajor]
    gpu_models: dict[str, GpuModelRule]
    driver_lifecycle: DriverLifecycle
    kernel_module: KernelModuleRule
    fabric_manager: FabricManagerRule
    nccl_cuda: list[NcclCudaRule]
    aws_ofi_nccl: list[AwsOfiNcclRule] = Field(default_factory=list)
    instance_floors: list[InstanceFloors]
    efa_env: list[EfaEnvRule]
    slurm_support: SlurmSupport
    slurm_families: dict[str, SlurmFamily]
    pyxis: PyxisRule
    os_images: OsImageRule
    fsx_lustre: FsxRules
    torch: TorchRules
    dcgm_cuda: list[DcgmCudaRule] = Field(default_factory=list)
    slurm_node_topology: SlurmNodeTopologyRule | None = None
    security_floors: SecurityFloors

    @model_validator(mode="after")
    def _sources_declared(self) -> CompatMatrix:
        for ref in self.source_refs():
            if ref not in self.sources:
                raise ValueError(f"source id {ref!r} is not declared under 'sources'")
        return self

    def _sourced(self) -> list[tuple[str, _Sourced]]:
        """Every rule with where it sits in the YAML."""
        out: list[tuple[str, _Sourced]] = [(f"cuda_releases.{r.cuda}", r) for r in self.cuda_releases]
        out += [(f"cuda_majors.{m.major}", m) for m in self.cuda_majors]
        out += [(f"gpu_models.{name}", rule) for name, rule in self.gpu_models.items()]
        out += [("driver_lifecycle", self.driver_lifecycle), ("kernel_module", self.kernel_module)]
        out += [("fabric_manager", self.fabric_manager)]
        out += [(f"nccl_cuda.{r.nccl_min}", r) for r in self.nccl_cuda]
        out += [(f"aws_ofi_nccl.{r.aws_ofi_nccl_min}", r) for r in self.aws_ofi_nccl]
        out += [(f"instance_floors.{','.join(g.instance_types)}", g) for g in self.instance_floors]
        out += [(f"efa_env.{r.id}", r) for r in self.efa_env]
        out += [("slurm_support", self.slurm_support)]
        out += [(f"slurm_families.{name}", fam) for name, fam in self.slurm_families.items()]
        out += [("pyxis", self.pyxis), ("os_images", self.os_images), ("fsx_lustre", self.fsx_lustre)]
        out += [("torch", self.torch)]
        out += [(f"torch.builds.{b.pin}", b) for b in self.torch.builds]
        out += [(f"dcgm_cuda.{r.cuda_major}", r) for r in self.dcgm_cuda]
        if self.slurm_node_topology is not None:
            out += [("slurm_node_topology", self.slurm_node_topology)]
        return out

    def source_refs(self) -> list[str]:
        return [ref for _where, item in self._sourced() for ref in item.source]

    def provenance(self) -> list[Provenance]:
        """Every rule, sourced or estimate (tests audit this list)."""
        return [Provenance(where, item.source, item.estimate, item.note) for where, item in self._sourced()]

    def estimates(self) -> list[Provenance]:
        """The rules no source states outright; each note says how it was derived."""
        return [p for p in self.provenance() if p.estimate]

    # --- look-ups ---------------------------------------------------------------------------

    def cuda_release(self, cuda: str) -> CudaRelease | None:
        """The table row for a toolkit version: same major.minor, the highest update <= the
        given one (12.8.1 -> 12.8 Update 1; Debian's 11.8.89 -> 11.8 GA). None if unknown."""
        want = vtuple(cuda) + (0, 0)
        rows = [r for r in self.cuda_releases if vtuple(r.cuda)[:2] == want[:2]]
        rows = [r for r in rows if vtuple(r.cuda)[2] <= want[2]]
        return max(rows, key=lambda r: vtuple(r.cuda)) if rows else None

    def driver_cuda_major(self, driver: str) -> int | None:
        """The CUDA major a driver supports (what its nvidia-smi reports as "CUDA Version"): the
        newest toolkit release whose minimum driver it meets. None below every row."""
        rows = [r for r in self.cuda_releases if at_least(driver, r.min_driver)]
        return major(max(rows, key=lambda r: vtuple(r.cuda)).cuda) if rows else None

    def cuda_minor_versions(self) -> list[str]:
        return sorted({major_minor(r.cuda) for r in self.cuda_releases}, key=vtuple)

    def cuda_major_floor(self, cuda: str) -> CudaMajor | None:
        return next((m for m in self.cuda_majors if m.major == str(major(cuda))), None)

    def gpu(self, model: str) -> GpuModelRule | None:
        return self.gpu_models.get(model)

    def nccl_cuda_majors(self, nccl: str) -> list[str] | None:
        rule = next((r for r in self.nccl_cuda if r.covers(nccl)), None)
        return rule.cuda_majors if rule else None

    def aws_ofi_nccl_rule(self, aws_ofi_nccl: str) -> AwsOfiNcclRule | None:
        """The NCCL floor of an aws-ofi-nccl release, or None where no release notes say."""
        return next((r for r in self.aws_ofi_nccl if r.covers(aws_ofi_nccl)), None)

    def floors_for(self, instance_type: str) -> list[tuple[VersionFloor, list[str]]]:
        """Every floor that applies to an instance type, with its sources."""
        return [
            (floor, group.source)
            for group in self.instance_floors
            if instance_type in group.instance_types
            for floor in group.floors
        ]

    def slurm_family(self, slurm: str) -> SlurmFamily | None:
        return self.slurm_families.get(major_minor(slurm))

    def dcgm_cuda_rule(self, cuda_major: int | str) -> DcgmCudaRule | None:
        """The first DCGM release with a -cuda<cuda_major> package; None for an unknown major."""
        return next((r for r in self.dcgm_cuda if r.cuda_major == str(cuda_major)), None)


def read_compat(path: Path) -> CompatMatrix:
    """Parse one matrix file (tests use this on altered copies)."""
    return CompatMatrix.model_validate(strict_yaml.load_file(path))


@cache
def load_compat() -> CompatMatrix:
    """The packaged compatibility matrix, parsed once per process."""
    return read_compat(COMPAT_FILE)
