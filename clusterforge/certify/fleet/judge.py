"""Fleet judging: each node's performance figures against a reference for its instance type.

Pure code: ``judge_run`` takes the node reports and returns verdicts; only the baseline store
reads files. Per (instance type, metric) the reference is, in order:

1. ``fleet``: the median of this run's nodes of the type, when at least ``MIN_FLEET_NODES`` (3)
   reported the metric; unless that median is itself ``fail_gap_pct`` or more under the stored
   baseline (or under the floor): then the whole batch is slow, and is judged against the
   baseline (or floor) instead — never "healthy because all agree";
2. ``baseline``: the stored baseline of earlier certified nodes (``clusterforge.certify.fleet.baseline``),
   if readable, recorded with the current software versions (or the profile allows others) and, for
   container nodes, with the same share of the machine (one of another share is never a reference);
3. ``floor``: the catalogue floor of the metric (with profile overrides), when it has one;
4. none: the figure is recorded ``unjudged``.

A figure ``warn_gap_pct`` under the reference warns, ``fail_gap_pct`` under fails; with at least
``MIN_Z_NODES`` (10) nodes, a robust z (0.6745 (x - median) / MAD) at or under ``-z_warn`` warns
too; a figure under its floor always fails. Limits: ``clusterforge.certify.fleet.rules``. Every
verdict carries one line with the evidence, for a drain reason after ``clusterforge: ``, e.g.
``matmul-burnin: 11.4 GFLOP/s, 75 % under the fleet median 46.5 (3 local nodes)``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterforge.catalog import load_hardware
from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.certify.fleet.baseline import Baseline, BaselineError, BaselineReference, BaselineStore
from clusterforge.certify.fleet.metrics import Figure, floor_keys, report_figures
from clusterforge.certify.fleet.rules import MAD_SCALE, MIN_FLEET_NODES, MIN_Z_NODES, Rules, rules_for

LINE_MAX = 150  # Slurm keeps the reason whole; people read one line


@dataclass(frozen=True)
class MetricVerdict:
    metric: str  # fleet metric name, e.g. "matmul-burnin.rate"
    check_id: str
    value: float
    unit: str
    higher_is_better: bool
    reference: float | None
    reference_kind: str  # "fleet" | "baseline" | "floor" | "none"
    gap_pct: float | None  # percent worse than the reference (negative: better)
    z: float | None  # robust z against the fleet (None: too few nodes, MAD 0, or not a fleet reference)
    status: str  # "pass" | "warn" | "fail" | "unjudged"
    line: str  # "<check-id>: <evidence>", one line
    note: str = ""  # why this reference was (not) used: baseline unusable, other versions, slow batch

    @property
    def reason(self) -> str:
        """The line without its check id: drain reason = f"clusterforge: {check_id}: {reason}"."""
        return self.line.removeprefix(f"{self.check_id}: ")


@dataclass
class NodeFleetVerdict:
    node: str
    instance_type: str
    report_passed: bool  # the node-side verdict of its report.json
    metrics: list[MetricVerdict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No figure failed fleet judging (the node-side verdict is the report's own)."""
        return not any(m.status == "fail" for m in self.metrics)

    @property
    def failing(self) -> list[tuple[str, str]]:
        """(check id, reason) per failed figure, worst gap first."""
        failed = sorted((m for m in self.metrics if m.status == "fail"), key=lambda m: -(m.gap_pct or 0))
        return [(m.check_id, m.reason) for m in failed]

    @property
    def warnings(self) -> list[str]:
        return [m.line for m in self.metrics if m.status == "warn"]


@dataclass(frozen=True)
class MetricGroup:
    """One metric of one instance type over the run: the fleet view a report plots."""

    instance_type: str
    metric: str
    unit: str
    higher_is_better: bool
    values: dict[str, float]  # node -> figure
    reference: float | None
    reference_kind: str
    warn_at: float | None  # figure at which a node warns / fails (None without a gap reference)
    fail_at: float | None
    fleet_median: float | None
    mad: float | None
    rules: Rules
    note: str = ""


@dataclass
class FleetJudgement:
    nodes: dict[str, NodeFleetVerdict]
    groups: list[MetricGroup]
    notes: list[str]


def _fmt(x: float) -> str:
    a = abs(x)
    return f"{x:.0f}" if a >= 100 else f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 1 else f"{x:.3g}"


def _pct(gap: float) -> str:
    return f"{abs(gap):.0f} %" if abs(gap) >= 10 else f"{abs(gap):.1f} %"


def _worse_pct(value: float, reference: float, higher: bool) -> float:
    if reference == 0:
        return 0.0
    return (reference - value) / reference * 100 if higher else (value - reference) / reference * 100


@dataclass(frozen=True)
class _Reference:
    value: float | None
    kind: str
    says: str  # "the fleet median 46.5 (3 local nodes)"
    note: str = ""  # the whole story, for MetricVerdict.note
    tail: str = ""  # the part a failing line must carry: why this reference is not the fleet


def _baseline_ref(
    baseline: Baseline | BaselineError | None,
    metric: str,
    versions: Mapping[str, str] | None,
    across: bool,
    share: str | None = None,
) -> tuple[BaselineReference | None, str]:
    """The usable baseline reference and a note saying why there is none (or why it is unusual)."""
    if isinstance(baseline, BaselineError):
        return None, f"baseline not used: {baseline}"
    ref = baseline.reference(metric, versions, across_versions=across, share=share) if baseline else None
    if ref is None:
        return None, ""
    if ref.other_share:
        return None, f"baseline of another share not a reference ({ref.other_share})"
    if ref.other_versions and not ref.applies:
        return None, (
            f"baseline recorded with other software versions ({ref.other_versions}), not applied "
            f"(certification profile baseline_across_versions: false)"
        )
    note = f"baseline recorded with other software versions ({ref.other_versions}), applied by the profile"
    return ref, note if ref.other_versions else ""


def _choose(
    kind: str,
    figures: list[Figure],
    rules: Rules,
    base: BaselineReference | None,
    base_note: str,
    floor: tuple[str, float] | None,
) -> _Reference:
    values = [f.value for f in figures]
    higher = figures[0].higher_is_better
    base_says = f"the baseline {_fmt(base.value)} ({base.samples} earlier {kind} samples)" if base else ""
    floor_says = f"the floor {_fmt(floor[1])} ({floor[0]})" if floor else ""
    if len(values) >= MIN_FLEET_NODES:
        median = statistics.median(values)
        if base and _worse_pct(median, base.value, higher) >= rules.fail_gap_pct:
            slow = f"the fleet median {_fmt(median)} is {_pct(_worse_pct(median, base.value, higher))} off it"
            return _Reference(
                base.value, "baseline", base_says, "; ".join(filter(None, [slow, base_note])), slow
            )
        if not base and floor and higher and median < floor[1]:
            slow = f"the fleet median {_fmt(median)} is under it too"
            return _Reference(floor[1], "floor", floor_says, "; ".join(filter(None, [slow, base_note])), slow)
        return _Reference(
            median, "fleet", f"the fleet median {_fmt(median)} ({len(values)} {kind} nodes)", base_note
        )
    few = f"{len(values)} {kind} node(s) reported it, fewer than {MIN_FLEET_NODES} for a fleet median"
    note = "; ".join(filter(None, [few, base_note]))
    if base:
        return _Reference(
            base.value, "baseline", base_says, note, "other software versions" if base_note else ""
        )
    if floor:
        skipped = (
            base_note.split(" (")[0]
            if base_note.startswith("baseline of another share")
            else "baseline not used"
        )
        return _Reference(floor[1], "floor", floor_says, note, skipped if base_note else "")
    return _Reference(None, "none", "", "; ".join(filter(None, [few, "no baseline", "no floor", base_note])))


def _judge_group(
    kind: str,
    metric: str,
    figures: dict[str, Figure],
    rules: Rules,
    ref: _Reference,
    floor: tuple[str, float] | None,
) -> tuple[dict[str, MetricVerdict], MetricGroup]:
    first = next(iter(figures.values()))
    higher, unit = first.higher_is_better, first.unit
    values = {n: f.value for n, f in figures.items()}
    median = statistics.median(values.values())
    mad = statistics.median(abs(v - median) for v in values.values())
    use_z = ref.kind == "fleet" and len(values) >= MIN_Z_NODES and mad > 0
    note = ref.note or ("" if mad > 0 or len(values) < MIN_Z_NODES else "MAD is 0: no robust z")
    out: dict[str, MetricVerdict] = {}
    for node, fig in sorted(figures.items()):
        shown = f"{fig.label} {_fmt(fig.value)} {unit}".strip() + (f" ({fig.detail})" if fig.detail else "")
        z = MAD_SCALE * (fig.value - median) / mad * (1 if higher else -1) if use_z else None
        gap = _worse_pct(fig.value, ref.value, higher) if ref.value is not None else None
        status, says = "unjudged", f"{shown}, not judged ({note})"
        if ref.kind == "floor" and gap is not None:
            failed = fig.value < ref.value  # type: ignore[operator]  # not None: gap is
            status = "fail" if failed else "pass"
            says = f"{shown}, {'under' if failed else 'at or over'} {ref.says}"
        elif gap is not None:
            status = "fail" if gap >= rules.fail_gap_pct else "warn" if gap >= rules.warn_gap_pct else "pass"
            if status == "pass" and z is not None and z <= -rules.z_warn:
                status = "warn"
            way = ("under" if higher else "over") if gap >= 0 else ("over" if higher else "under")
            says = f"{shown}, {_pct(gap)} {way} {ref.says}"
            if z is not None and status != "pass":
                says += f", robust z {z:.1f}"
        if floor and higher and fig.value < floor[1] and ref.kind != "floor":
            status, says = "fail", f"{shown}, under the floor {_fmt(floor[1])} ({floor[0]})"
        if ref.tail and status in ("warn", "fail"):
            says += f"; {ref.tail}"
        line = f"{fig.check_id}: {says}"
        line = line if len(line) <= LINE_MAX else line[: LINE_MAX - 1] + "…"
        out[node] = MetricVerdict(
            metric, fig.check_id, fig.value, unit, higher, ref.value, ref.kind, gap, z, status, line, note
        )
    bands = ref.kind in ("fleet", "baseline") and ref.value is not None
    sign = -1 if higher else 1
    group = MetricGroup(
        kind,
        metric,
        unit,
        higher,
        values,
        ref.value,
        ref.kind,
        ref.value * (1 + sign * rules.warn_gap_pct / 100) if bands else None,  # type: ignore[operator]  # bands: not None
        ref.value * (1 + sign * rules.fail_gap_pct / 100) if bands else None,  # type: ignore[operator]  # bands: not None
        median if len(values) >= MIN_FLEET_NODES else None,
        mad if len(values) >= MIN_FLEET_NODES else None,
        rules,
        note,
    )
    return out, group


def _floor(
    catalog: HardwareCatalog, kind: str, metric: str, overrides: Mapping[str, float]
) -> tuple[str, float] | None:
    if kind not in catalog:
        return None
    limits = {**catalog.thresholds_for(kind), **overrides}
    for key in floor_keys(metric):
        if key in limits:
            return key, float(limits[key])
    return None


def _load_baselines(
    baselines: BaselineStore | Mapping[str, Baseline | BaselineError] | None, kinds: list[str]
) -> dict[str, Baseline | BaselineError | None]:
    if baselines is None:
        return dict.fromkeys(kinds)
    if isinstance(baselines, Mapping):
        return {k: baselines.get(k) for k in kinds}
    out: dict[str, Baseline | BaselineError | None] = {}
    for k in kinds:
        try:
            out[k] = baselines.load(k)
        except BaselineError as exc:
            out[k] = exc
    return out


def judge_run(
    reports: Mapping[str, Mapping[str, Any]],
    types: Mapping[str, str],
    *,
    catalog: HardwareCatalog | None = None,
    baselines: BaselineStore | Mapping[str, Baseline | BaselineError] | None = None,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
    versions: Mapping[str, Mapping[str, str]] | None = None,
    across_versions: Mapping[str, bool] | None = None,
    shares: Mapping[str, str] | None = None,
) -> FleetJudgement:
    """Judge every node's figures against its instance type's reference (see the module docstring).

    ``reports``: node -> report.json dict; ``types``: node -> instance type (a node missing there
    uses its report's ``instance_type``). By instance type: ``overrides`` (the profile's
    ``thresholds``, floors and ``fleet.*`` keys), ``versions`` (software pins now, to match
    baseline samples; a type missing there skips the version check), ``across_versions`` (the
    profile's ``baseline_across_versions``) and ``shares`` (container types: the share of the machine
    the nodes have, ``Share.label``; only samples of that share are a reference; a type missing
    there skips the share check)."""
    hw = catalog or load_hardware()
    by_type: dict[str, dict[str, dict[str, Figure]]] = {}
    nodes: dict[str, NodeFleetVerdict] = {}
    for node, report in sorted(reports.items()):
        kind = types.get(node) or str(report.get("instance_type") or "")
        nodes[node] = NodeFleetVerdict(node, kind, report.get("verdict") == "pass")
        for metric, fig in report_figures(report).items():
            by_type.setdefault(kind, {}).setdefault(metric, {})[node] = fig
    stored = _load_baselines(baselines, sorted(by_type))
    notes = [f"{k}: baseline not used: {b}" for k, b in stored.items() if isinstance(b, BaselineError)]
    groups: list[MetricGroup] = []
    for kind, metrics in sorted(by_type.items()):
        limits = dict((overrides or {}).get(kind, {}))
        for metric, figures in sorted(metrics.items()):
            rules = rules_for(hw, kind, metric, limits)
            floor = _floor(hw, kind, metric, limits)
            base, base_note = _baseline_ref(
                stored.get(kind),
                metric,
                (versions or {}).get(kind),
                bool((across_versions or {}).get(kind)),
                (shares or {}).get(kind),
            )
            if base_note.startswith("baseline of another share"):
                note = f"{kind}: {base_note}"
                notes += [] if note in notes else [note]
            ref = _choose(kind, list(figures.values()), rules, base, base_note, floor)
            verdicts, group = _judge_group(kind, metric, figures, rules, ref, floor)
            groups.append(group)
            for node, verdict in verdicts.items():
                nodes[node].metrics.append(verdict)
    for node_verdict in nodes.values():
        node_verdict.notes = [n for n in notes if n.startswith(f"{node_verdict.instance_type}: ")]
    return FleetJudgement(nodes, groups, notes)
