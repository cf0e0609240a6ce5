"""What ``judge_run`` and ``record_run`` need from a cluster spec, per compute instance type."""

from __future__ import annotations

from dataclasses import dataclass

from clusterforge.catalog import load_hardware
from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.node.config import pinned_software
from clusterforge.spec.models import ClusterSpec


@dataclass(frozen=True)
class FleetInputs:
    """By instance type: the profile's threshold overrides (floors and ``fleet.*`` keys), the
    software versions the nodes are pinned to (NODE.json ``software``), and whether a baseline of
    other versions still applies (the profile's ``baseline_across_versions``)."""

    overrides: dict[str, dict[str, float]]
    versions: dict[str, dict[str, str]]
    across_versions: dict[str, bool]


def fleet_inputs(
    spec: ClusterSpec, profile: str | None = None, catalog: HardwareCatalog | None = None
) -> FleetInputs:
    """From each compute pool's certification profile (or ``profile`` for all, as ``certify
    --profile`` does). Two pools of one type with different profiles: the first pool's wins."""
    hw = catalog or load_hardware()
    overrides: dict[str, dict[str, float]] = {}
    versions: dict[str, dict[str, str]] = {}
    across: dict[str, bool] = {}
    for pool in spec.pools_with_role("gpu"):
        it = hw.get(pool.instance_type)
        name = profile or pool.certification
        prof = spec.certification.profiles.get(name or "")
        if it is None or it.name in overrides:
            continue
        overrides[it.name] = dict(prof.thresholds) if prof else {}
        versions[it.name] = pinned_software(spec, it)
        across[it.name] = bool(prof and prof.baseline_across_versions)
    return FleetInputs(overrides, versions, across)
