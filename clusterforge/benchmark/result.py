"""The benchmark's result document (schema in docs/benchmark.md), assembled from typed figures (pure)."""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from clusterforge.benchmark.attribution import Limit
from clusterforge.benchmark.breakdown import LABELS, PARTS, TrainPoint
from clusterforge.benchmark.delivery import Delivery
from clusterforge.benchmark.inference import InferPoint
from clusterforge.benchmark.records import Telemetry

SCHEMA = "clusterforge-benchmark"
SCHEMA_VERSION = 1
SERIES_POINTS = 120  # telemetry points per node and run kept in the result (the raw files keep all)
SERIES = ("cpu_pct", "mem_bytes", "net_rx_bps", "net_tx_bps", "power_w", "gpu_util_pct", "gpu_mem_mib")


def comparable_key(instance_type: str, sizes: Mapping[str, Any]) -> str:
    """Runs of the same node type and workload sizes are compared with each other."""
    text = json.dumps({"instance_type": instance_type, "sizes": sizes}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def limit_dict(lim: Limit | None) -> dict[str, Any] | None:
    if lim is None:
        return None
    return {"part": lim.part, "label": lim.label, "share": round(lim.share, 4), "seconds": lim.seconds,
            "line": lim.line, "short": lim.short, "rank": lim.rank, "node": lim.node}  # fmt: skip


def train_point(p: TrainPoint, lim: Limit | None) -> dict[str, Any]:
    b = p.breakdown
    return {
        "nodes": p.nodes,
        "ranks": p.ranks,
        "node_names": list(p.node_names),
        "steps": p.steps,
        "tokens_per_s": p.tokens_per_s,
        "tokens_per_s_per_rank": p.tokens_per_s_per_rank,
        "step_time_s": {"median": p.step_median, "p95": p.step_p95, "mean": b.step},
        "efficiency": p.efficiency,
        "mfu": p.mfu,
        "breakdown": {part: b.parts[part] for part in PARTS},
        "shares": {part: round(b.share(part), 4) for part in PARTS},
        "comm_total_s": p.comm_total,
        "comm_hidden": p.comm_hidden,
        "slow_rank": asdict(p.slow_rank) if p.slow_rank is not None else None,
        "limit": limit_dict(lim),
        "ranks_detail": [
            {
                "rank": s.rank,
                "node": s.node,
                "own_s": s.own,
                "critical_share": round(s.critical_share, 3),
                "parts": s.parts,
            }  # fmt: skip
            for s in p.ranks_stats
        ],
    }


def infer_point(p: InferPoint) -> dict[str, Any]:
    return {
        "batch": p.batch, "requests": p.requests, "devices": p.devices, "tokens_per_s": p.tokens_per_s,
        "latency_p50_s": p.latency_p50, "latency_p99_s": p.latency_p99, "ttft_p50_s": p.ttft_p50,
    }  # fmt: skip


def data_section(d: Delivery) -> dict[str, Any]:
    return {
        "rows": [asdict(r) for r in d.rows],
        "consumed_samples_per_s": d.consumed,
        "fed": d.fed,
        "enough_workers": d.enough_workers,
        "stops_scaling_at": d.stops_scaling_at,
        "line": d.line,
    }


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def telemetry_section(tel: Telemetry) -> dict[str, Any]:
    """Per node and run: what could be sampled, summary figures and a thinned time series."""
    s = tel.samples
    col = {name: [getattr(x, name) for x in s] for name in SERIES}
    have = {name: [v for v in vals if v is not None] for name, vals in col.items()}
    summary = {
        "samples": len(s),
        "cpu_pct_mean": _mean(have["cpu_pct"]),
        "cpu_pct_max": max(have["cpu_pct"], default=None),
        "mem_bytes_max": max(have["mem_bytes"], default=None),
        "net_rx_bps_mean": _mean(have["net_rx_bps"]),
        "net_tx_bps_mean": _mean(have["net_tx_bps"]),
        "power_w_mean": _mean(have["power_w"]),
        "gpu_util_pct_mean": _mean(have["gpu_util_pct"]),
    }
    stride = max(1, -(-len(s) // SERIES_POINTS))
    series = {"t": [x.t for x in s[::stride]]}
    for name in SERIES:
        if have[name]:
            series[name] = col[name][::stride]
    return {"meta": tel.meta, "summary": summary, "series": series}


def software_set(software: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """One value per component over the nodes; ``mixed: a, b`` where they differ."""
    keys = sorted({k for v in software.values() for k in v})
    out = {}
    for k in keys:
        values = sorted({v.get(k, "?") for v in software.values()})
        out[k] = values[0] if len(values) == 1 else "mixed: " + ", ".join(values)
    return out


def train_line(points: Sequence[TrainPoint], lim: Limit | None) -> str:
    if not points:
        return "no training figures"
    top = max(points, key=lambda p: p.nodes)
    eff = f", efficiency {top.efficiency:.2f}" if top.efficiency is not None and top.nodes > 1 else ""
    head = f"{top.tokens_per_s:,.0f} tokens/s at {top.nodes} node(s){eff}"
    return f"{head}; limit: {lim.line}" if lim is not None else head


def labels() -> dict[str, str]:
    return dict(LABELS)
