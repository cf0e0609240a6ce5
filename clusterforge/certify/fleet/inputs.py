"""What ``judge_run`` and ``record_run`` need from a cluster spec, per compute instance type."""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterforge.catalog import load_hardware
from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.node.config import pinned_software
from clusterforge.providers.local.share import compute_share_label
from clusterforge.spec.models import ClusterSpec


@dataclass(frozen=True)
class FleetInputs:
    """By instance type: the profile's threshold overrides (floors and ``fleet.*`` keys), the
    software versions the nodes are pinned to (NODE.json ``software``), whether a baseline of
    other versions still applies (the profile's ``baseline_across_versions``), and for container
    types the share of the machine each node has (``Share.label``; "" for real instance types)."""

    overrides: dict[str, dict[str, float]]
    versions: dict[str, dict[str, str]]
    across_versions: dict[str, bool]
    shares: dict[str, str] = field(default_factory=dict)


def fleet_inputs(
    spec: ClusterSpec, profile: str | None = None, catalog: HardwareCatalog | None = None
) -> FleetInputs:
    """From each compute pool's certification profile (or ``profile`` for all, as ``certify
    --profile`` does). Two pools of one type with different profiles: the first pool's wins."""
    hw = catalog or load_hardware()
    overrides: dict[str, dict[str, float]] = {}
    versions: dict[str, dict[str, str]] = {}
    across: dict[str, bool] = {}
    shares: dict[str, str] = {}
    for pool in spec.pools_with_role("gpu"):
        it = hw.get(pool.instance_type)
        name = profile or pool.certification
        prof = spec.certification.profiles.get(name or "")
        if it is None or it.name in overrides:
            continue
        overrides[it.name] = dict(prof.thresholds) if prof else {}
        versions[it.name] = pinned_software(spec, it)
        across[it.name] = bool(prof and prof.baseline_across_versions)
        shares[it.name] = compute_share_label(spec, hw) if it.container else ""
    return FleetInputs(overrides, versions, across, shares)
