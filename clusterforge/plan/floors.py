"""The plan's note on version floors: which pools run a pinned version below an NVIDIA bulletin's floor
or with a known defect (clusterforge.catalog.floors).

Driver, DCGM, the container toolkit, CUDA and NCCL run on the GPU pools, at the spec's pinned versions (the
roles install and hold exactly those), so every node of a GPU pool runs below the floor the spec is.
"""

from __future__ import annotations

from clusterforge.catalog import CompatMatrix, HardwareCatalog, load_compat, load_hardware
from clusterforge.catalog.floors import Bulletin
from clusterforge.spec.checks.health import pinned_below_floors
from clusterforge.spec.models import ClusterSpec


def floor_notes(
    spec: ClusterSpec, compat: CompatMatrix | None = None, hardware: HardwareCatalog | None = None
) -> list[str]:
    """One note per GPU pool and component below a floor; empty when every pin meets its floors."""
    compat = compat or load_compat()
    hardware = hardware or load_hardware()
    below = list(pinned_below_floors(spec, compat.security_floors))
    notes: list[str] = []
    for pool in spec.node_pools:
        it = hardware.get(pool.instance_type)
        if it is None or it.gpu is None or pool.count == 0:
            continue
        names = spec.node_names(pool)
        span = names[0] if len(names) == 1 else f"{names[0]}..{names[-1]}"
        for _path, component, version, unmet in below:
            top = unmet[0]
            src = top.source
            detail = ", ".join(src.cves) if isinstance(src, Bulletin) else src.title
            kind = "security floor" if top.security else "known defect"
            notes.append(
                f"{kind}: pool {pool.name} ({len(names)} node(s) {span}) runs {component} {version}, "
                f"below {top.floor.fixed} ({top.label()}, {src.published}, {detail}); "
                f"pin {top.floor.fixed} or later and `invoke upgrade`"
            )
    return notes
