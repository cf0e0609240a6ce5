"""From validators' report.json dicts (validators/SCHEMA.md) to what the HTML page shows.

Reports come from nodes, so nothing here trusts their shape: a missing key, a string where a
number belongs or a report that is absent altogether gives "no report" / no point, never an
exception. Plot data is read from the metric names the validators checks record today:
``nccl-*``: ``<label>.busbw`` + ``<label>.message_bytes``; ``gloo-allreduce``: ``busbw`` +
``message_bytes``; ``matmul-burnin``: ``rate_device_<i>``, ``rate_median``;
``checkpoint-restart``: ``ckpt_/plain_ write/read_rate``. Per-size bus bandwidth rows are read
from the optional check key ``series`` (``{name: {"x_unit", "y_unit", "points": [[x, y], ...]}}``,
name ``<label>.busbw``) when a report carries it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from clusterforge.reports.svg import Bar, BarGroup, HLine, Series

STATUSES = ("pass", "fail", "warn", "skip", "error")
BAD = ("fail", "error")
KIND_SINGLE = "single-node"
KIND_NETWORK = "network"
BUSBW_CHECKS = ("nccl-single-node", "nccl-multi-node", "gloo-allreduce")
_THRESHOLD_RE = re.compile(r"^(nccl|gloo)\.([a-z_]+)\.(\d+)node\.busbw_gbps$")
_DEVICE_RE = re.compile(r"^rate_device_(\d+)$")


def num(value: Any) -> float | None:
    """A finite number from report text, else None (bools are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def natural_key(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def checks_of(report: dict[str, Any]) -> list[dict[str, Any]]:
    checks = report.get("checks")
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def measure(block: Any, name: str) -> tuple[float | None, str]:
    """(value, unit) of a metrics/threshold entry {name: {value, unit}}."""
    entry = block.get(name) if isinstance(block, dict) else None
    if not isinstance(entry, dict):
        return None, ""
    return num(entry.get("value")), str(entry.get("unit") or "")


@dataclass
class NodeRun:
    """One node of the run: its reports (single-node first, then network) or why there are none."""

    node: str
    reports: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (kind, report)
    missing: list[str] = field(default_factory=list)  # reasons a report is absent

    @property
    def verdict(self) -> str:
        """ "pass", "fail" or "no report" (a node without its single-node report is never a pass)."""
        bad = any(
            r.get("verdict") == "fail" or any(c.get("status") in BAD for c in checks_of(r))
            for _, r in self.reports
        )
        if bad:
            return "fail"
        if not any(kind == KIND_SINGLE for kind, _ in self.reports):
            return "no report"
        return "pass" if all(r.get("verdict") == "pass" for _, r in self.reports) else "fail"

    def cells(self) -> dict[str, dict[str, Any]]:
        """Column id -> check; network checks get a ``network:`` prefix so both kinds show."""
        out: dict[str, dict[str, Any]] = {}
        for kind, report in self.reports:
            for check in checks_of(report):
                cid = str(check.get("id") or "?")
                out[cid if kind == KIND_SINGLE else f"{kind}:{cid}"] = check
        return out

    def failing(self) -> list[tuple[str, str]]:
        rows = [
            (cid, str(c.get("summary") or "")) for cid, c in self.cells().items() if c.get("status") in BAD
        ]
        return rows + [("report", why) for why in self.missing]

    def main(self) -> dict[str, Any]:
        return next((r for kind, r in self.reports if kind == KIND_SINGLE), {})


def group_runs(reports: list[dict[str, Any]]) -> list[NodeRun]:
    """Group report dicts by node. A dict ``{"node": n, "missing": reason}`` marks an absent report;
    ``"kind": "network"`` marks a network-report.json (see clusterforge/reports/__init__.py)."""
    runs: dict[str, NodeRun] = {}
    for report in reports:
        if not isinstance(report, dict):
            continue
        node = str(report.get("node") or "?")
        run = runs.setdefault(node, NodeRun(node))
        if "missing" in report:
            run.missing.append(str(report["missing"]))
        elif not isinstance(report.get("checks"), list):
            run.missing.append("report.json has no list of checks (not a validators report?)")
        else:
            kind = str(report.get("kind") or KIND_SINGLE)
            run.reports.append((kind, report))
    for run in runs.values():
        run.reports.sort(key=lambda kr: kr[0] != KIND_SINGLE)
    return [runs[n] for n in sorted(runs, key=natural_key)]


def columns(runs: list[NodeRun]) -> list[str]:
    """Check ids in run order (first seen), single-node before network columns."""
    seen: list[str] = []
    for run in runs:
        for cid in run.cells():
            if cid not in seen:
                seen.append(cid)
    return sorted(seen, key=lambda c: ":" in c)  # stable: keeps the registry order within each kind


# -- plot data ---------------------------------------------------------------------------------


@dataclass
class Chart:
    title: str
    kind: str  # "line" | "bar"
    y_unit: str
    series: list[Series] = field(default_factory=list)
    groups: list[BarGroup] = field(default_factory=list)
    hlines: list[HLine] = field(default_factory=list)
    node: str = ""  # set for per-node charts


def _series_points(check: dict[str, Any], name: str) -> list[tuple[float, float]]:
    block = check.get("series")
    entry = block.get(name) if isinstance(block, dict) else None
    pts = entry.get("points") if isinstance(entry, dict) else None
    out = []
    for p in pts if isinstance(pts, list) else []:
        if isinstance(p, list | tuple) and len(p) == 2:
            x, y = num(p[0]), num(p[1])
            if x is not None and y is not None and x > 0:
                out.append((x, y))
    return out


def _busbw_labels(check: dict[str, Any]) -> list[str]:
    """Labels with a busbw: ``<label>.busbw`` metrics/series (nccl), ``busbw`` (gloo: label "")."""
    names = set(_dict(check.get("metrics"))) | set(_dict(check.get("series")))
    return sorted({n[: -len("busbw")].rstrip(".") for n in names if n == "busbw" or n.endswith(".busbw")})


def busbw_charts(runs: list[NodeRun]) -> list[Chart]:
    """One chart per (report kind, check, collective): a series per node, thresholds dashed."""
    charts: dict[tuple[str, str, str], Chart] = {}
    for run in runs:
        for kind, report in run.reports:
            for check in checks_of(report):
                cid = str(check.get("id"))
                if cid not in BUSBW_CHECKS:
                    continue
                for label in _busbw_labels(check):
                    collective = label.split(".")[0] if label else "all_reduce"
                    rest = label[len(collective) + 1 :]
                    prefix = f"{label}." if label else ""
                    points = _series_points(check, f"{prefix}busbw")
                    if not points:  # today's reports: the judged row only
                        y, _ = measure(check.get("metrics"), f"{prefix}busbw")
                        x, _ = measure(check.get("metrics"), f"{prefix}message_bytes")
                        points = [(x, y)] if x and y is not None else []
                    if not points:
                        continue
                    title = f"{cid} {collective}" + ("" if kind == KIND_SINGLE else f" ({kind})")
                    chart = charts.setdefault((kind, cid, collective), Chart(title, "line", "GB/s"))
                    chart.series.append(Series(f"{run.node} {rest}".strip(), points))
                    for key in sorted(_dict(check.get("threshold"))):
                        m = _THRESHOLD_RE.match(key)
                        value, _ = measure(check.get("threshold"), key)
                        line = HLine(value, key) if value is not None else None
                        if m and m.group(2) == collective and line and line not in chart.hlines:
                            chart.hlines.append(line)
    return list(charts.values())


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def busbw_fleet_charts(runs: list[NodeRun], worst: int = 5) -> list[Chart]:
    """The busbw charts of many nodes as the fleet's band: per message size the median and the
    10th and 90th percentiles over the nodes, and the ``worst`` nodes (lowest at their largest
    size) on their own; the thresholds as in ``busbw_charts``. A line per node stops being readable
    (and grows the page) past a few dozen nodes."""
    out = []
    for chart in busbw_charts(runs):
        at: dict[float, list[float]] = {}
        for series in chart.series:
            for x, y in series.points:
                at.setdefault(x, []).append(y)
        if len(chart.series) <= worst:
            out.append(chart)
            continue
        xs = sorted(at)
        band = [
            Series(name, [(x, _quantile(at[x], q)) for x in xs])
            for name, q in (("median", 0.5), ("10th percentile", 0.1), ("90th percentile", 0.9))
        ]
        lowest = sorted(chart.series, key=lambda s: max(s.points)[1] if s.points else 0.0)[:worst]
        title = f"{chart.title}: {len(chart.series)} nodes"
        out.append(Chart(title, "line", chart.y_unit, series=band + lowest, hlines=chart.hlines))
    return out


def matmul_chart(run: NodeRun) -> Chart | None:
    """Per-device rate bars of the node's matmul-burnin, with floor, median and median-gap lines."""
    check = next((c for c in checks_of(run.main()) if c.get("id") == "matmul-burnin"), None)
    if check is None or not isinstance(check.get("metrics"), dict):
        return None
    metrics, limits = check["metrics"], check.get("threshold")
    devices = sorted((int(m.group(1)), name) for name in metrics if (m := _DEVICE_RE.match(name)))
    if not devices:
        return None
    unit = measure(metrics, devices[0][1])[1]
    gpu = unit.upper().startswith("TFLOP")
    floor_key = "matmul.tflops_min" if gpu else "matmul.cpu_gflops_min"
    gap_key = "matmul.median_gap_pct" if gpu else "matmul.cpu_median_gap_pct"
    floor, median = measure(limits, floor_key)[0], measure(metrics, "rate_median")[0]
    gap = measure(limits, gap_key)[0]
    gap_limit = median * (1 - gap / 100) if median is not None and gap is not None else None
    limits_low = [v for v in (floor, gap_limit) if v is not None]
    lowest = max(limits_low) if limits_low else None  # a bar under either line is a finding
    groups = []
    for index, name in devices:
        value = measure(metrics, name)[0]
        if value is None:
            continue
        tag = "below limit" if lowest is not None and value < lowest else "rate"
        groups.append(BarGroup(f"{'gpu' if gpu else 'cpu'} {index}", [Bar(tag, value)]))
    hlines = []
    if floor is not None:
        hlines.append(HLine(floor, floor_key))
    if median is not None:
        hlines.append(HLine(median, "median", "median"))
        if gap_limit is not None and gap is not None:
            hlines.append(HLine(gap_limit, f"median -{gap:g}%", "limit"))
    title = f"{run.node}: matmul rate per {'GPU' if gpu else 'CPU worker'}"
    return Chart(title, "bar", unit, groups=groups, hlines=hlines, node=run.node)


def checkpoint_charts(runs: list[NodeRun]) -> list[Chart]:
    """Checkpoint write and read rate against plain sequential I/O of the same size, per node."""
    charts = []
    for op in ("write", "read"):
        groups = []
        for run in runs:
            check = next((c for c in checks_of(run.main()) if c.get("id") == "checkpoint-restart"), None)
            if check is None:
                continue
            ckpt, _ = measure(check.get("metrics"), f"ckpt_{op}_rate")
            plain, _ = measure(check.get("metrics"), f"plain_{op}_rate")
            if ckpt is None or plain is None:
                continue
            ratio_key = f"checkpoint.{op}_ratio_min"
            ratio, _ = measure(check.get("threshold"), ratio_key)
            marks = [HLine(plain * ratio, ratio_key)] if ratio is not None else []
            groups.append(
                BarGroup(run.node, [Bar("checkpoint", ckpt, marks), Bar("plain sequential", plain)])
            )
        if groups:
            charts.append(
                Chart(f"checkpoint {op} rate vs plain sequential {op}", "bar", "MB/s", groups=groups)
            )
    return charts
