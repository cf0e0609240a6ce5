"""Inference figures by batch size and the knee where batching stops paying (pure).

Per batch size, over every repeat on every device of the node: per-request latency p50/p99
(static batching: a request's latency is its batch's), time to first token p50, and the node's
tokens/s (per device: batch x new tokens / its median batch time; summed over devices).

The knee: the first batch size past which the next size raises tokens/s by less than
``KNEE_GAIN`` per doubling of the batch while the latency keeps climbing: beyond it a bigger
batch buys latency, not throughput. None when throughput keeps scaling to the largest batch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from clusterforge.benchmark.breakdown import percentile
from clusterforge.benchmark.records import InferBatch

KNEE_GAIN = 0.10


@dataclass(frozen=True)
class InferPoint:
    batch: int
    requests: int  # latency samples behind the percentiles (batches x repeats x devices)
    latency_p50: float
    latency_p99: float
    ttft_p50: float
    tokens_per_s: float
    devices: int


def points(rows: Sequence[InferBatch]) -> list[InferPoint]:
    out = []
    for batch in sorted({r.batch for r in rows}):
        same = [r for r in rows if r.batch == batch]
        devices = sorted({r.local_rank for r in same})
        rate = 0.0
        for d in devices:
            mine = [r for r in same if r.local_rank == d]
            rate += batch * mine[0].new_tokens / statistics.median(r.seconds for r in mine)
        lat = [r.seconds for r in same]
        out.append(
            InferPoint(
                batch,
                len(lat) * batch,
                statistics.median(lat),
                percentile(lat, 99),
                statistics.median(r.ttft for r in same),
                rate,
                len(devices),
            )  # fmt: skip
        )
    return out


def knee(found: Sequence[InferPoint], gain: float = KNEE_GAIN) -> InferPoint | None:
    ordered = sorted(found, key=lambda p: p.batch)
    for a, b in zip(ordered, ordered[1:], strict=False):
        doublings = math.log2(b.batch / a.batch) if b.batch > a.batch else 1.0
        more = b.tokens_per_s / a.tokens_per_s - 1 if a.tokens_per_s > 0 else 0.0
        if more < gain * doublings and b.latency_p50 > a.latency_p50:
            return a
    return None


def knee_line(found: Sequence[InferPoint], point: InferPoint | None) -> str:
    if not found:
        return "no inference figures"
    top = max(found, key=lambda p: p.batch)
    if point is None:
        return (
            f"throughput still rises at batch {top.batch} ({top.tokens_per_s:,.0f} tokens/s, p50 latency "
            f"{top.latency_p50 * 1000:.0f} ms): no knee up to the largest batch measured"
        )
    after = [p for p in found if p.batch > point.batch]
    nxt = min(after, key=lambda p: p.batch) if after else None
    more = (
        f"; batch {nxt.batch} adds {100 * (nxt.tokens_per_s / point.tokens_per_s - 1):.0f} % tokens/s for p50 latency {nxt.latency_p50 * 1000:.0f} ms"
        if nxt
        else ""
    )
    return (
        f"knee at batch {point.batch}: {point.tokens_per_s:,.0f} tokens/s at p50 latency "
        f"{point.latency_p50 * 1000:.0f} ms (p99 {point.latency_p99 * 1000:.0f} ms){more}"
    )
