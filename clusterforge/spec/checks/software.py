"""Checks on the software set against the compatibility matrix and the GPUs in the pools."""

from __future__ import annotations

from collections.abc import Iterable

from clusterforge.catalog.versions import at_least, major, major_minor, vcmp
from clusterforge.spec.checks.base import Check, CheckContext, Issue, error, info, one_of, suggest, warning

SW = "software"


class DriverBranch(Check):
    id = "driver-branch"
    summary = "driver.branch is the first part of driver.version; distro drivers match the OS archive"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        drv = ctx.spec.software.driver
        prefix = drv.version.split(".")[0]
        if prefix != drv.branch:
            yield error(
                f"{SW}.driver.version",
                f"driver.version {drv.version} is not on driver.branch {drv.branch}; "
                f'set branch: "{prefix}" or a {drv.branch}.x version',
            )
        if drv.source == "distro":
            os_image = ctx.spec.software.os_image
            carried = ctx.compat.os_images.distro_driver_branch.get(os_image)
            if carried is None:
                yield error(
                    f"{SW}.driver.source",
                    f"source 'distro' on {os_image}: clusterforge knows no distro driver there; use cuda-repo",
                )
            elif carried != drv.branch:
                yield error(
                    f"{SW}.driver.branch",
                    f"{os_image}'s own archive carries driver branch {carried}, not {drv.branch}; "
                    f'set branch "{carried}" or source: cuda-repo',
                )


class DriverLifecycle(Check):
    id = "driver-lifecycle"
    summary = "The driver branch is still supported by NVIDIA (no security fixes after end of life)"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        drv = ctx.spec.software.driver
        life = ctx.compat.driver_lifecycle
        ended = life.ended(drv.branch)
        if ended is None:
            return
        supported = [b for b, v in life.branches.items() if v.end_of_life > life.as_of]
        text = (
            f"driver branch {drv.branch} reached end of life ({ended}; NVIDIA's list as of {life.as_of}): no more "
            f"security or bug fixes; supported branches: {', '.join(supported)}"
        )
        # Cloud nodes run real GPUs for real work; local/static distro drivers are the OS's choice.
        yield (warning if ctx.provider == "aws" and drv.source == "cuda-repo" else info)(
            f"{SW}.driver.branch", text
        )


class CudaDriver(Check):
    id = "cuda-driver"
    summary = "The driver is at least the minimum the CUDA toolkit release needs"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        sw = ctx.spec.software
        row = ctx.compat.cuda_release(sw.cuda)
        if row is None:
            known = ctx.compat.cuda_minor_versions()
            yield error(
                f"{SW}.cuda",
                f"unknown CUDA release {sw.cuda}{suggest(major_minor(sw.cuda), known)}; "
                f"{one_of(known, limit=20)} (clusterforge/data/compatibility.yaml)",
            )
            return
        if not at_least(sw.driver.version, row.min_driver):
            floor = ctx.compat.cuda_major_floor(sw.cuda)
            compat = (
                f" (minor version compatibility would start at {floor.min_driver}, without PTX JIT or new APIs)"
                if floor and at_least(sw.driver.version, floor.min_driver)
                else ""
            )
            yield error(
                f"{SW}.driver.version",
                f"driver {sw.driver.version} is older than CUDA {sw.cuda} needs: >= {row.min_driver}{compat}; "
                f"raise the driver or lower cuda",
            )


class GpuDriverCuda(Check):
    id = "gpu-driver-cuda"
    summary = "Driver and CUDA are new enough for every GPU model in the pools"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        sw = ctx.spec.software
        seen: set[str] = set()
        for i, pool, it in ctx.gpu_pools():
            model = it.gpu.model if it.gpu else ""
            if model in seen:
                continue
            seen.add(model)
            rule = ctx.compat.gpu(model)
            if rule is None:
                yield error(
                    f"node_pools[{i}].instance_type",
                    f"GPU model {model} has no rule in compatibility.yaml gpu_models; add one",
                )
                continue
            where = f"{model} ({rule.architecture}, pool {pool.name!r})"
            if not at_least(sw.driver.version, rule.min_driver):
                yield error(
                    f"{SW}.driver.version",
                    f"driver {sw.driver.version} is too old for {where}: needs >= {rule.min_driver}",
                )
            if not at_least(sw.cuda, rule.min_cuda):
                yield error(
                    f"{SW}.cuda", f"CUDA {sw.cuda} cannot build for {where}: needs CUDA >= {rule.min_cuda}"
                )


class KernelModule(Check):
    id = "kernel-module"
    summary = "Open kernel module where required (B200), and only on drivers that ship it"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        drv = ctx.spec.software.driver
        path = f"{SW}.driver.kernel_module"
        if drv.kernel_module == "open" and not at_least(
            drv.version, ctx.compat.kernel_module.open_min_driver
        ):
            yield error(
                path,
                f"kernel_module 'open' needs driver >= {ctx.compat.kernel_module.open_min_driver} "
                f"(got {drv.version}); use 'proprietary' or a newer driver",
            )
        seen: set[str] = set()
        for _i, pool, it in ctx.gpu_pools():
            rule = ctx.compat.gpu(it.gpu.model) if it.gpu else None
            if rule is None or it.gpu is None or it.gpu.model in seen:
                continue
            seen.add(it.gpu.model)
            if drv.kernel_module not in rule.kernel_modules:
                yield error(
                    path,
                    f"{it.gpu.model} (pool {pool.name!r}) works only with kernel_module "
                    f"{' or '.join(repr(k) for k in rule.kernel_modules)}; got {drv.kernel_module!r}",
                )


class FabricManager(Check):
    id = "fabric-manager"
    summary = "NVSwitch types run fabric manager at exactly the driver's version"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        sw = ctx.spec.software
        nvswitch = [(pool, it) for _i, pool, it in ctx.gpu_pools() if it.gpu and it.gpu.nvswitch]
        rule = ctx.compat.fabric_manager
        all_known = all(p.instance_type in ctx.hardware for p in ctx.spec.node_pools)
        if not nvswitch:
            if sw.fabric_manager is not None and ctx.provider != "static" and all_known:
                yield info(
                    f"{SW}.fabric_manager", "no pool has NVSwitch; fabric_manager will not be installed"
                )
            return
        pool, it = nvswitch[0]
        if sw.fabric_manager is None:
            if rule.required_on_nvswitch:
                yield error(
                    SW,
                    f"pool {pool.name!r} ({it.name}) has NVSwitch: set software.fabric_manager to the driver "
                    f"version, {sw.driver.version}",
                )
        elif rule.must_equal_driver and vcmp(sw.fabric_manager, sw.driver.version) != 0:
            yield error(
                f"{SW}.fabric_manager",
                f"fabric_manager {sw.fabric_manager} != driver.version {sw.driver.version}; on NVSwitch types "
                f"({it.name}) they must be the same version exactly: set fabric_manager: {sw.driver.version}",
            )


class NcclCuda(Check):
    id = "nccl-cuda"
    summary = "NCCL has a build for the CUDA major in use"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        sw = ctx.spec.software
        if sw.nccl is None:
            if any(p.role == "gpu" and p.count > 0 for _i, p, _it in ctx.gpu_pools()):
                yield warning(
                    f"{SW}", "no software.nccl: multi-GPU collectives and NCCL certification need it"
                )
            return
        majors = ctx.compat.nccl_cuda_majors(sw.nccl)
        # Without GPU pools NCCL is not installed (container nodes take the gloo path): say so, don't fail.
        on_gpus = any(True for _ in ctx.gpu_pools())
        level = error if on_gpus else info
        why = "" if on_gpus else " (no GPU pool here, so NCCL is not installed; on GPUs this is an error)"
        if majors is None:
            yield level(
                f"{SW}.nccl", f"NCCL {sw.nccl} is outside every range in compatibility.yaml nccl_cuda{why}"
            )
        elif str(major(sw.cuda)) not in majors:
            yield level(
                f"{SW}.nccl",
                f"NCCL {sw.nccl} is built for CUDA {' and '.join(majors)}, not CUDA {major(sw.cuda)} "
                f"(software.cuda {sw.cuda}); pick an NCCL built for CUDA {major(sw.cuda)}{why}",
            )
        if sw.nccl_tests is not None and major(sw.nccl_tests) != 2:
            yield warning(f"{SW}.nccl_tests", f"nccl_tests {sw.nccl_tests}: nccl-tests releases are 2.x")


class EfaSoftware(Check):
    id = "efa-software"
    summary = (
        "EFA pools install the EFA installer, aws-ofi-nccl and an NCCL it supports, on an OS the installer "
        "supports"
    )

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        sw = ctx.spec.software
        if sw.aws_ofi_nccl and not sw.efa_installer:
            yield error(
                f"{SW}.aws_ofi_nccl", "aws_ofi_nccl needs efa_installer (libfabric) as well: set both"
            )
        if sw.aws_ofi_nccl and not sw.nccl:
            yield error(
                f"{SW}.aws_ofi_nccl", "aws_ofi_nccl is NCCL's network plugin: set software.nccl as well"
            )
        plugin = ctx.compat.aws_ofi_nccl_rule(sw.aws_ofi_nccl) if sw.aws_ofi_nccl else None
        if plugin and sw.nccl and not at_least(sw.nccl, plugin.nccl_min):
            yield error(
                f"{SW}.nccl",
                f"aws_ofi_nccl {sw.aws_ofi_nccl} supports NCCL {plugin.nccl_min} and later (its release "
                f"notes); nccl {sw.nccl} is older: raise software.nccl or pick an older aws_ofi_nccl",
            )
        efa = [(pool, it) for _i, pool, it in ctx.typed_pools() if it.has_efa and pool.role == "gpu"]
        if not efa or ctx.provider != "aws":
            if (
                sw.efa_installer
                and ctx.provider == "aws"
                and all(p.instance_type in ctx.hardware for p in ctx.spec.node_pools)
            ):
                yield info(
                    f"{SW}.efa_installer", "no pool has EFA interfaces; the EFA installer will not be run"
                )
            return
        pool, it = efa[0]
        for key in ("efa_installer", "aws_ofi_nccl", "nccl"):
            if getattr(sw, key) is None:
                yield error(
                    SW,
                    f"pool {pool.name!r} uses EFA ({it.name}, {it.network.efa_interfaces} interfaces) but "
                    f"software.{key} is not set; NCCL reaches EFA only through efa_installer + aws_ofi_nccl",
                )
        if sw.os_image not in ctx.compat.os_images.efa_installer:
            yield error(
                f"{SW}.os_image",
                f"the EFA installer does not support {sw.os_image}; "
                f"{one_of(ctx.compat.os_images.efa_installer)}",
            )


class InstanceFloors(Check):
    id = "instance-software-floors"
    summary = "Per instance type minimums (p5: CUDA >= 12.0, NCCL >= 2.18, aws-ofi-nccl >= 1.7.2)"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        sw = ctx.spec.software
        done: set[tuple[str, str]] = set()
        for _i, pool, it in ctx.typed_pools():
            for floor, _src in ctx.compat.floors_for(it.name):
                value = sw.driver.version if floor.component == "driver" else getattr(sw, floor.component)
                if value is None or (floor.component, floor.required) in done:
                    continue
                done.add((floor.component, floor.required))
                path = f"{SW}.driver.version" if floor.component == "driver" else f"{SW}.{floor.component}"
                if not at_least(value, floor.required):
                    yield error(
                        path,
                        f"{floor.component} {value} is below the {it.name} minimum {floor.required} "
                        f"(pool {pool.name!r})",
                    )
                elif floor.recommended and not at_least(value, floor.recommended):
                    yield warning(
                        path,
                        f"{floor.component} {value} works on {it.name} but {floor.recommended} or later is "
                        "recommended",
                    )


class EfaEnv(Check):
    id = "efa-nccl-env"
    summary = "Known EFA/NCCL combinations that need an environment variable (FI_EFA_SET_CUDA_SYNC_MEMOPS)"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        sw = ctx.spec.software
        if sw.nccl is None or sw.efa_installer is None:
            return
        for rule in ctx.compat.efa_env:
            if at_least(sw.nccl, rule.nccl_min) and not at_least(sw.efa_installer, rule.efa_installer_below):
                env = " ".join(f"{k}={v}" for k, v in rule.env.items())
                text = (
                    f"{rule.message}; set {env} in the jobs' environment, or upgrade efa_installer to "
                    f">= {rule.efa_installer_below}"
                )
                yield Issue(rule.level, f"{SW}.efa_installer", text)


class SlurmFamily(Check):
    id = "slurm-family"
    summary = "Slurm version belongs to a known release family; unsupported families are flagged"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        slurm = ctx.spec.software.slurm
        fam = ctx.compat.slurm_family(slurm)
        families = list(ctx.compat.slurm_families)
        if fam is None:
            yield error(
                f"{SW}.slurm",
                f"{slurm} is not in a Slurm release family{suggest(major_minor(slurm), families)}; "
                f"families: {', '.join(families)}",
            )
        elif not fam.upstream_supported:
            supported = [f for f, v in ctx.compat.slurm_families.items() if v.upstream_supported]
            text = f"Slurm {major_minor(slurm)} is past SchedMD's support; supported: {', '.join(supported)}"
            yield (warning if ctx.provider == "aws" else info)(f"{SW}.slurm", text)


class ContainerStack(Check):
    id = "container-stack"
    summary = "pyxis needs enroot (>= 3.1.0); enroot on GPUs needs nvidia-container-toolkit"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        sw = ctx.spec.software
        if sw.pyxis is not None:
            if sw.enroot is None:
                yield error(f"{SW}.pyxis", "pyxis runs containers through enroot: set software.enroot")
            elif not at_least(sw.enroot, ctx.compat.pyxis.enroot_min):
                yield error(
                    f"{SW}.enroot", f"pyxis needs enroot >= {ctx.compat.pyxis.enroot_min} (got {sw.enroot})"
                )
        if sw.enroot is not None and sw.nvidia_container_toolkit is None and any(ctx.gpu_pools()):
            yield warning(
                f"{SW}.enroot", "enroot without nvidia_container_toolkit: containers will not see the GPUs"
            )


class OsImageProvider(Check):
    id = "os-image-provider"
    summary = "The provider can build the os_image"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        os_image = ctx.spec.software.os_image
        allowed = ctx.compat.os_images.providers.get(ctx.provider, [])
        if os_image not in allowed:
            yield error(
                f"{SW}.os_image",
                f"os_image {os_image!r} is not supported on provider {ctx.provider!r}; {one_of(allowed)}",
            )
