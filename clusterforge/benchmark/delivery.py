"""Does shared storage keep the devices fed? The loader sweep against the training step (pure).

The loader sweep gives samples/s from shared storage with 1, 2, 4, ... reader processes on one
node. The training step consumes, per node, ranks x micro-batch samples per median step time
(the single-node training run of the same benchmark). Storage keeps the node fed when the best
rate is at least that; the answer also names the fewest readers that suffice, and the reader
count past which doubling adds less than ``SCALE_GAIN`` (where reading stops scaling).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from clusterforge.benchmark.records import LoaderRow

SCALE_GAIN = 0.10


@dataclass(frozen=True)
class Delivery:
    rows: tuple[LoaderRow, ...]
    consumed: float | None  # samples/s one node's training consumes (None: no training figure)
    fed: bool | None
    enough_workers: int | None  # the fewest readers whose rate covers ``consumed``
    stops_scaling_at: int | None  # the reader count past which doubling adds < SCALE_GAIN
    line: str


def stops_scaling(rows: Sequence[LoaderRow], gain: float = SCALE_GAIN) -> int | None:
    ordered = sorted(rows, key=lambda r: r.workers)
    for a, b in zip(ordered, ordered[1:], strict=False):
        doublings = math.log2(b.workers / a.workers) if b.workers > a.workers else 1.0
        if a.samples_per_s > 0 and b.samples_per_s / a.samples_per_s - 1 < gain * doublings:
            return a.workers
    return None


def judge(rows: Sequence[LoaderRow], consumed: float | None, sample_bytes: int) -> Delivery:
    ordered = tuple(sorted(rows, key=lambda r: r.workers))
    if not ordered:
        return Delivery((), consumed, None, None, None, "no loader figures")
    best = max(ordered, key=lambda r: r.samples_per_s)
    knee = stops_scaling(ordered)
    scaling = (
        f"reading stops scaling past {knee} reader(s)" if knee is not None
        else f"still scaling at {ordered[-1].workers} readers"
    )  # fmt: skip
    cache = "" if all(r.direct for r in ordered) else " (buffered reads: the file system refused O_DIRECT)"
    rate = f"{best.samples_per_s:,.0f} samples/s ({best.mb_per_s:,.1f} MB/s of {sample_bytes // 1024} KiB samples) with {best.workers} reader(s){cache}"
    if consumed is None:
        return Delivery(
            ordered,
            None,
            None,
            None,
            knee,
            f"storage delivers {rate}; {scaling}; no training figure to compare with",
        )
    enough = next((r.workers for r in ordered if r.samples_per_s >= consumed), None)
    fed = best.samples_per_s >= consumed
    if fed:
        line = (
            f"storage keeps a node fed: {rate} against the {consumed:,.1f} samples/s one node's training step "
            f"consumes ({best.samples_per_s / consumed:,.1f}x; {enough} reader(s) suffice); {scaling}"
        )
    else:
        line = (
            f"storage cannot keep a node fed: {rate} against the {consumed:,.1f} samples/s one node's "
            f"training step consumes ({best.samples_per_s / consumed:.2f}x); {scaling}"
        )
    return Delivery(ordered, consumed, fed, enough, knee, line)
