"""Fleet-judging rules per instance type and metric: catalogue defaults, profile overrides.

Defaults live in the hardware catalogue (``fleet_defaults``, or a type's own ``fleet`` block). A
certification profile overrides them through its ``thresholds`` map, next to the floors:

    fleet.warn_gap_pct / fleet.fail_gap_pct / fleet.z_warn            every metric of the profile
    fleet.<metric>.warn_gap_pct (… fail_gap_pct, z_warn)             one metric, e.g.
    fleet.shared-storage.write_rate.fail_gap_pct                     (wins over the line above)

``<metric>`` is a fleet metric name (``clusterforge.certify.fleet.metrics.KNOWN_METRICS``). The
spec check ``threshold-overrides`` accepts exactly ``override_keys()`` and ``override_problems``'
verdicts, so a misspelt key is an error, never silently ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.certify.fleet.metrics import KNOWN_METRICS

# This run's median is the reference only with at least this many nodes of the type reporting
# the metric: with 2, the median is the mean, and a slow node drags its own reference halfway.
MIN_FLEET_NODES = 3
# The robust z-score needs a MAD worth the name: Azure asks >= 10 nodes for fleet z-scores
# (ai-infrastructure-on-azure skills/slurm/cluster_outlier_detection.md).
MIN_Z_NODES = 10
# Azure's modified z: 0.6745 (x - median) / MAD (0.6745 makes MAD comparable to one sd).
MAD_SCALE = 0.6745

PREFIX = "fleet."
FIELDS = ("warn_gap_pct", "fail_gap_pct", "z_warn")


@dataclass(frozen=True)
class Rules:
    """The limits one metric of one instance type is judged with."""

    warn_gap_pct: float
    fail_gap_pct: float
    z_warn: float
    source: str  # where they came from: "catalogue local (estimate)", "profile override ..."


def override_keys(metrics: Iterable[str] | None = None) -> list[str]:
    """Every key a profile may set to override fleet rules (generic and per metric)."""
    names = sorted(KNOWN_METRICS) if metrics is None else sorted(metrics)
    keys = [f"{PREFIX}{f}" for f in FIELDS]
    keys += [f"{PREFIX}{m}.{f}" for m in names for f in FIELDS]
    return keys


def _override(overrides: Mapping[str, float], metric: str, field: str) -> tuple[float, str] | None:
    for key in (f"{PREFIX}{metric}.{field}", f"{PREFIX}{field}"):
        if key in overrides:
            return float(overrides[key]), key
    return None


def rules_for(
    catalog: HardwareCatalog, instance_type: str, metric: str, overrides: Mapping[str, float] | None = None
) -> Rules:
    """Limits for one metric of one type: the catalogue's, with a profile's ``fleet.*`` overrides."""
    base = catalog.fleet_rules(instance_type)
    own = catalog.get(instance_type)
    where = (
        f"catalogue {instance_type}"
        if own is not None and own.fleet is not None
        else "catalogue fleet_defaults"
    )
    if base.estimate:
        where += " (estimate)"
    values = {f: float(getattr(base, f)) for f in FIELDS}
    own_gaps = base.metrics.get(metric)
    profile_sets_gaps = any(_override(overrides or {}, metric, f) for f in ("warn_gap_pct", "fail_gap_pct"))
    # The catalogue may give a noisy metric its own gaps; a profile that sets gaps decides alone.
    if own_gaps is not None and not profile_sets_gaps:
        values["warn_gap_pct"], values["fail_gap_pct"] = own_gaps.warn_gap_pct, own_gaps.fail_gap_pct
        where += f" ({metric}'s own gaps)"
    used: list[str] = []
    for field in FIELDS:
        found = _override(overrides or {}, metric, field)
        if found is not None:
            values[field], key = found
            used.append(key)
    source = where if not used else f"{where}, profile {', '.join(used)}"
    return Rules(values["warn_gap_pct"], values["fail_gap_pct"], values["z_warn"], source)


def override_problems(
    overrides: Mapping[str, float], metrics: Iterable[str] | None = None
) -> list[tuple[str, str]]:
    """(key, message) for each bad ``fleet.*`` override; keys not under ``fleet.`` are not looked at."""
    known = set(override_keys(metrics))
    problems: list[tuple[str, str]] = []
    for key, value in overrides.items():
        if not key.startswith(PREFIX):
            continue
        if key not in known:
            problems.append((key, f"unknown fleet rule {key!r}"))
        elif key.endswith("_gap_pct") and not 0 < value < 100:
            problems.append(
                (key, f"{key} is a percent under the reference: give 0 < value < 100 (got {value})")
            )
        elif key.endswith("z_warn") and value <= 0:
            problems.append((key, f"{key} warns at robust z <= -value: give a value > 0 (got {value})"))
    return problems


def ordering_problems(
    catalog: HardwareCatalog,
    instance_type: str,
    overrides: Mapping[str, float],
    metrics: Iterable[str] | None = None,
) -> list[tuple[str, str]]:
    """(key, message) where the overrides leave a metric's warn gap at or over its fail gap."""
    out: list[tuple[str, str]] = []
    for metric in sorted(KNOWN_METRICS) if metrics is None else metrics:
        rules = rules_for(catalog, instance_type, metric, overrides)
        if rules.warn_gap_pct >= rules.fail_gap_pct:
            key = next(
                (
                    k
                    for k in (f"{PREFIX}{metric}.warn_gap_pct", f"{PREFIX}{metric}.fail_gap_pct")
                    if k in overrides
                ),
                f"{PREFIX}warn_gap_pct" if f"{PREFIX}warn_gap_pct" in overrides else f"{PREFIX}fail_gap_pct",
            )
            out.append(
                (
                    key,
                    f"{instance_type} {metric}: warn gap {rules.warn_gap_pct:g} % must be under the fail gap "
                    f"{rules.fail_gap_pct:g} % ({rules.source})",
                )
            )
            break  # one message per type is enough to act on
    return out
