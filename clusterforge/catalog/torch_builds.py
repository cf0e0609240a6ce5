"""Which PyTorch build a cluster's driver and GPUs can run: a rule, not a pin.

A torch wheel is compiled for one CUDA release (its local label: ``2.13.0+cu126``) and carries
kernels for a list of GPU architectures. The driver must support that CUDA's major release
(``compatibility.yaml`` cuda_majors: minor version compatibility), and the build must carry every
GPU's architecture. PyPI's plain ``torch==2.13.0`` is the CUDA 13.0 build (``pypi_default``): on an
R570 driver it imports, finds no usable GPU, and every torch check fails with nothing saying why.

``resolve_torch`` takes the spec's wish (a version, maybe a CUDA variant) with the driver and the
GPUs, and returns the build to install, or why none fits with what would (``TorchChoice.problem``).
The spec check ``torch-driver``, the inventory (``validators_runtime_torch_*``) and NODE.json
(``software.torch``) all go through it, for every provider.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterforge.catalog.compat import CompatMatrix, TorchBuild
from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.catalog.versions import at_least, major, vtuple

if TYPE_CHECKING:
    from clusterforge.spec.models import ClusterSpec


@dataclass(frozen=True)
class TorchChoice:
    build: TorchBuild | None
    problem: str = ""  # why no build fits, naming the versions and what would fit


def min_driver(compat: CompatMatrix, build: TorchBuild) -> str:
    """The oldest driver a build runs on: its CUDA major's minor-version-compatibility floor."""
    floor = compat.cuda_major_floor(build.cuda)
    if floor is None:
        raise ValueError(f"compatibility.yaml: no cuda_majors row for CUDA {build.cuda} (torch {build.pin})")
    return floor.min_driver


def runs_on(architectures: Iterable[str], arch: str) -> bool:
    """Whether a build carrying kernels for ``architectures`` runs on a GPU of ``arch``: the same
    architecture, or a cubin of the same major and a lower or equal minor (CUDA's binary compatibility:
    "a cubin generated for a certain compute capability is supported to run on any GPU with the same
    major revision and same or higher minor revision"; e.g. sm_100 kernels on a B300, sm_103).
    Architecture-specific cubins (sm_90a, sm_100a, sm_100f) run on their own architecture only."""
    if arch in architectures:
        return True
    want = arch.removeprefix("sm_")
    if not want.isdigit():
        return False
    for have in architectures:
        got = have.removeprefix("sm_")
        if got.isdigit() and got[:-1] == want[:-1] and int(got[-1]) <= int(want[-1]):
            return True
    return False


def _gpus(gpus: Iterable[tuple[str, str]]) -> str:
    return ", ".join(f"{model} ({arch})" for model, arch in sorted(set(gpus)))


def resolve_torch(
    compat: CompatMatrix,
    version: str | None,
    cuda: str | None,
    driver: str,
    gpus: Iterable[tuple[str, str]],
) -> TorchChoice:
    """The build of ``version`` (default: the catalogue's) for ``driver`` and ``gpus`` ((model,
    architecture) pairs): ``cuda`` pinned, or else the newest non-experimental CUDA that fits."""
    version = version or compat.torch.default_version
    gpus = sorted(set(gpus))
    archs = {arch for _, arch in gpus}
    builds = [b for b in compat.torch.builds if b.torch == version]

    def driver_ok(b: TorchBuild) -> bool:
        return at_least(driver, min_driver(compat, b))

    def fits(b: TorchBuild) -> bool:
        return driver_ok(b) and all(runs_on(b.architectures, a) for a in archs)

    def alternatives() -> str:
        usable = sorted(
            (b for b in compat.torch.builds if fits(b) and not b.experimental),
            key=lambda b: (vtuple(b.torch), vtuple(b.cuda)),
            reverse=True,
        )
        if not usable:
            return "no torch build in compatibility.yaml fits: use a newer driver branch"
        best = usable[0]
        return (
            f'e.g. software.torch: {{version: {best.torch}, cuda: "{best.cuda}"}} ({best.pin} from '
            f"{best.index_url})"
        )

    if not builds:
        known = sorted({b.torch for b in compat.torch.builds}, key=vtuple)
        return TorchChoice(
            None,
            f"torch {version}: no build of it in compatibility.yaml (known: {', '.join(known)}); {alternatives()}",
        )
    if cuda is not None:
        build = next((b for b in builds if b.cuda == cuda), None)
        if build is None:
            variants = ", ".join(b.cuda for b in builds)
            return TorchChoice(None, f"torch {version} has no CUDA {cuda} build (its builds: {variants})")
        if not driver_ok(build):
            floor = min_driver(compat, build)
            return TorchChoice(
                None,
                f"torch {build.pin} is built for CUDA {build.cuda}, which needs driver >= {floor} (CUDA "
                f"{major(build.cuda)}.x minor version compatibility); driver {driver} cannot run it. Fix: "
                f"{alternatives()}, or a driver of branch {floor.split('.')[0]} or newer",
            )
        missing = {a for a in archs if not runs_on(build.architectures, a)}
        if missing:
            odd = _gpus(g for g in gpus if g[1] in missing)
            return TorchChoice(
                None,
                f"torch {build.pin} has no kernels for {odd} (it carries {', '.join(build.architectures)}). "
                f"Fix: {alternatives()}",
            )
        return TorchChoice(build)
    usable = sorted((b for b in builds if fits(b) and not b.experimental), key=lambda b: vtuple(b.cuda))
    if usable:
        return TorchChoice(usable[-1])
    return TorchChoice(
        None,
        f"no build of torch {version} runs on driver {driver} with {_gpus(gpus) or 'these GPUs'} "
        f"(its builds: {', '.join(f'{b.pin} needs driver >= {min_driver(compat, b)}' for b in builds)}). "
        f"Fix: {alternatives()}",
    )


def spec_torch(spec: ClusterSpec, hardware: HardwareCatalog, compat: CompatMatrix) -> TorchChoice | None:
    """The torch build of a spec's GPU nodes (``software.torch`` or the catalogue's default version,
    for ``software.driver`` and every GPU pool's GPUs); None where no pool has GPUs."""
    gpus = []
    for pool in spec.node_pools:
        it = hardware.get(pool.instance_type)
        if it is not None and it.gpu is not None and not it.container:
            gpus.append((it.gpu.model, it.gpu.architecture))
    if not gpus:
        return None
    pin = spec.software.torch
    return resolve_torch(
        compat, pin.version if pin else None, pin.cuda if pin else None, spec.software.driver.version, gpus
    )
