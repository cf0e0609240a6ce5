"""Latency percentiles and the knee (clusterforge/benchmark/inference.py)."""

from __future__ import annotations

import pytest

from clusterforge.benchmark.inference import InferPoint, knee, knee_line, points
from clusterforge.benchmark.records import InferBatch


def rows(batch: int, seconds: list[float], device: int = 0) -> list[InferBatch]:
    return [InferBatch(device, batch, s, s / 4, 16) for s in seconds]


def test_points_take_percentiles_over_repeats_and_sum_devices() -> None:
    found = points(rows(4, [0.1, 0.2, 0.3, 0.4]) + rows(4, [0.2, 0.2, 0.2, 0.2], device=1))
    (p,) = found
    assert p.devices == 2 and p.requests == 32
    assert p.latency_p50 == pytest.approx(0.2) and p.latency_p99 == pytest.approx(0.4)
    assert p.tokens_per_s == pytest.approx(4 * 16 / 0.25 + 4 * 16 / 0.2)


def _pt(batch: int, rate: float, lat: float) -> InferPoint:
    return InferPoint(batch, batch, lat, lat, lat / 4, rate, 1)


def test_the_knee_is_where_doubling_stops_paying_while_latency_climbs() -> None:
    curve = [_pt(1, 100, 0.10), _pt(2, 190, 0.105), _pt(4, 360, 0.11), _pt(8, 380, 0.21), _pt(16, 390, 0.41)]
    k = knee(curve)
    assert k is not None and k.batch == 4
    assert knee_line(curve, k).startswith("knee at batch 4: 360 tokens/s at p50 latency 110 ms")
    assert "batch 8 adds 6 % tokens/s for p50 latency 210 ms" in knee_line(curve, k)


def test_no_knee_while_throughput_keeps_rising() -> None:
    curve = [_pt(1, 100, 0.1), _pt(4, 390, 0.1), _pt(16, 1500, 0.12)]
    assert knee(curve) is None
    assert "no knee up to the largest batch measured" in knee_line(curve, None)


def test_a_flat_throughput_without_latency_growth_is_not_a_knee() -> None:
    assert knee([_pt(1, 100, 0.1), _pt(2, 100, 0.1)]) is None
