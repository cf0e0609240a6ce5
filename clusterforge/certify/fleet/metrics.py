"""The performance figures of a node's report.json that fleet judging compares between nodes.

Which check records which metric is validators' contract (validators/SCHEMA.md and
``validators/checks/*.py``); this module names those metrics once, so the judge, the baseline
store and the spec's override keys agree. Rules:

- ``matmul-burnin`` records ``rate_device_<i>`` per device: the node's figure is its worst device
  ("one bad GPU = bad node", Azure ai-infrastructure-on-azure cluster_outlier_detection.md).
  ``rate_median`` is the same measurement again and is not judged twice. On the CPU path (its
  threshold names ``matmul.cpu_*``) the "devices" are worker processes time-sharing the node's
  cores: which worker the scheduler slowed says nothing of the node (the check itself allows them
  50 % apart), so the node's figure is ``rate_median`` there. A healthy container node certified
  alone measured 24.4 and 30.1 GFLOP/s on its two workers and failed 29 % under the baseline on
  the first (local stack, 2026-12-06); a node capped to two thirds of its share lowers both.
- ``nccl-single-node`` records ``<collective>.busbw``; ``gloo-allreduce`` records ``busbw`` (its
  ``algbw`` is busbw times a constant, so it is left out). A gloo run with peers is multi-node: the
  network check judges those links, not this module.
- ``checkpoint-restart`` records ``ckpt_write_rate`` / ``ckpt_read_rate``; its ``plain_*`` rates
  and ratios are the node-side check's own yardstick. ``shared-storage`` records
  ``write_rate`` / ``read_rate``.
- ``gpu-burn`` records ``rate_device_<i>`` (GFLOP/s, the median of each GPU's progress figures),
  picked up by the device rule.
- Any other metric in a throughput unit (per second) becomes a figure too, so a new check's
  throughput is judged without touching this file. Counts, sizes, ratios, rc and versions are not
  performance figures.

Higher is better, except metrics measured in time units (a latency): lower is better there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Per-device metric names; the node's figure is the worst device.
_DEVICE = re.compile(r"^(?P<base>[a-z_]*?)_?(?:device|gpu)_(?P<index>\d+)$")

# Metrics that repeat or derive from a judged one, or are the check's own yardstick.
_IGNORED = {
    ("matmul-burnin", "rate_median"),
    ("gloo-allreduce", "algbw"),
    ("checkpoint-restart", "plain_write_rate"),
    ("checkpoint-restart", "plain_read_rate"),
}

# Multi-node checks: judged per link by the network localisation (clusterforge/certify/network/runner.py).
_MULTI_NODE_CHECKS = {"nccl-multi-node"}

_THROUGHPUT_UNIT = re.compile(r"^[A-Za-z]*(?:B|bit|FLOP|flop|op|sample|token|img|step)s?/s$")
_TIME_UNITS = {"s", "ms", "us", "µs", "ns"}

# Figures the checks record today, by fleet metric name -> (check id, what the line calls it).
KNOWN_METRICS: dict[str, tuple[str, str]] = {
    "matmul-burnin.rate": ("matmul-burnin", ""),  # the check id says it all
    "gpu-burn.rate": ("gpu-burn", ""),
    "gloo-allreduce.busbw": ("gloo-allreduce", "busbw"),
    "checkpoint-restart.ckpt_write_rate": ("checkpoint-restart", "checkpoint write"),
    "checkpoint-restart.ckpt_read_rate": ("checkpoint-restart", "checkpoint read"),
    "shared-storage.write_rate": ("shared-storage", "write"),
    "shared-storage.read_rate": ("shared-storage", "read"),
}
# nccl-single-node: one busbw per collective it runs (validators SCHEMA.md nccl.collectives).
for _coll in ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "sendrecv"):
    KNOWN_METRICS[f"nccl-single-node.{_coll}.busbw"] = ("nccl-single-node", f"{_coll} busbw")


@dataclass(frozen=True)
class Figure:
    """One performance figure of one node, as judged against the fleet."""

    metric: str  # fleet metric name: "<check id>.<metric>", devices folded: "matmul-burnin.rate"
    check_id: str
    value: float
    unit: str
    higher_is_better: bool
    label: str  # how the one-line reason names it: "matmul", "all_reduce busbw", "write"
    detail: str = ""  # which device gave the figure: "device 3"


def label_of(metric: str) -> str:
    """How a reason names a metric: the known label, else the metric's own name."""
    known = KNOWN_METRICS.get(metric)
    return known[1] if known else metric.split(".", 1)[-1]


def floor_keys(metric: str) -> tuple[str, ...]:
    """Catalogue threshold keys (validators SCHEMA.md) that floor this metric, first found wins."""
    if metric == "matmul-burnin.rate":
        return ("matmul.tflops_min", "matmul.cpu_gflops_min")
    if metric == "gloo-allreduce.busbw":
        return ("gloo.all_reduce.1node.busbw_gbps",)
    match = re.fullmatch(r"nccl-single-node\.([a-z_]+)\.busbw", metric)
    if match:
        return (f"nccl.{match.group(1)}.1node.busbw_gbps",)
    return ()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _is_performance(unit: str) -> bool:
    return bool(_THROUGHPUT_UNIT.match(unit)) or unit in _TIME_UNITS


def _multi_node(check: Mapping[str, Any]) -> bool:
    """A gloo run with peers: its threshold names N > 1 nodes (validators/checks/gloo.py)."""
    limits = check.get("threshold")
    keys = limits.keys() if isinstance(limits, Mapping) else ()
    return any(re.search(r"\.(\d+)node\.", k) and ".1node." not in k for k in keys)


def _cpu_workers(check: Mapping[str, Any]) -> bool:
    """A matmul burn-in of CPU workers (validators/profiles.py: ``matmul.cpu_*`` thresholds)."""
    limits = check.get("threshold")
    return isinstance(limits, Mapping) and any(str(k).startswith("matmul.cpu_") for k in limits)


def check_figures(check: Mapping[str, Any]) -> list[Figure]:
    """The performance figures of one check entry of report.json (malformed parts are skipped)."""
    check_id = check.get("id")
    metrics = check.get("metrics")
    if not isinstance(check_id, str) or not isinstance(metrics, Mapping):
        return []
    if check_id in _MULTI_NODE_CHECKS or (check_id == "gloo-allreduce" and _multi_node(check)):
        return []
    worst: dict[str, Figure] = {}
    out: list[Figure] = []
    workers = check_id == "matmul-burnin" and _cpu_workers(check)
    for name, body in metrics.items():
        if workers and isinstance(name, str) and isinstance(body, Mapping):
            if _DEVICE.match(name):
                continue  # one worker's rate is the node-side check's (50 % apart allowed)
            value, unit = _number(body.get("value")), body.get("unit")
            if name == "rate_median" and value is not None and isinstance(unit, str):
                metric = f"{check_id}.rate"
                out.append(
                    Figure(metric, check_id, value, unit, True, label_of(metric), "median of the workers")
                )
                continue
        if not isinstance(name, str) or not isinstance(body, Mapping) or (check_id, name) in _IGNORED:
            continue
        value, unit = _number(body.get("value")), body.get("unit")
        if value is None or not isinstance(unit, str) or not _is_performance(unit):
            continue
        higher = unit not in _TIME_UNITS
        device = _DEVICE.match(name)
        if device:
            base = device.group("base")
            metric = f"{check_id}.{'rate' if base in ('', 'rate', 'gflops', 'tflops') else base}"
            figure = Figure(
                metric, check_id, value, unit, higher, label_of(metric), f"device {device['index']}"
            )
            held = worst.get(metric)
            if held is None or (value < held.value if higher else value > held.value):
                worst[metric] = figure
            continue
        metric = f"{check_id}.{name}"
        out.append(Figure(metric, check_id, value, unit, higher, label_of(metric)))
    return out + list(worst.values())


def report_figures(report: Mapping[str, Any]) -> dict[str, Figure]:
    """Every performance figure of one node's report.json, by fleet metric name.

    Checks that did not measure (skip, error) contribute nothing; a check that failed still does:
    its figure is what the node measured, and fleet judging says how far off it is."""
    checks = report.get("checks") if isinstance(report, Mapping) else None
    out: dict[str, Figure] = {}
    for check in checks if isinstance(checks, list) else []:
        if not isinstance(check, Mapping) or check.get("status") in ("skip", "error"):
            continue
        for figure in check_figures(check):
            out.setdefault(figure.metric, figure)
    return out
