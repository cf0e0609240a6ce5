"""Simulated fleets for the fleet-judging tests and benchmarks/fleet_rules.py.

A report here is shaped like validators' report.json (validators/SCHEMA.md): a matmul-burnin
check with one ``rate_device_<i>`` per device and a shared-storage check with write/read rates.
Healthy figures are normal around a true value with a relative spread ``sd`` (1-2 % is what
GPUs of one type show; ml-engineering: GPUs within a node differ by ~5 % at most). An outlier's
true figure is ``gap`` percent under the healthy one.
"""

from __future__ import annotations

import random
from typing import Any

MATMUL = 46.5  # GFLOP/s: a healthy local container node (issue 10's three peers: 46.2-47.2)
WRITE = 250.0  # MB/s


def report(
    node: str,
    *,
    matmul: list[float] | None = None,
    write: float | None = WRITE,
    verdict: str = "pass",
    instance_type: str = "local",
    unit: str = "GFLOP/s",
) -> dict[str, Any]:
    """A report.json dict with the given figures (matmul per device)."""
    rates = [MATMUL, MATMUL] if matmul is None else matmul
    metrics = {f"rate_device_{i}": {"value": r, "unit": unit} for i, r in enumerate(rates)}
    metrics["rate_median"] = {"value": sorted(rates)[len(rates) // 2], "unit": unit}
    checks: list[dict[str, Any]] = [
        {"id": "matmul-burnin", "status": "pass", "summary": "", "metrics": metrics, "threshold": {}},
    ]
    if write is not None:
        checks.append(
            {
                "id": "shared-storage",
                "status": "pass",
                "summary": "",
                "metrics": {
                    "write_rate": {"value": write, "unit": "MB/s"},
                    "read_rate": {"value": write * 4, "unit": "MB/s"},
                    "test_bytes": {"value": 16777216, "unit": "B"},
                },
                "threshold": {},
            }
        )
    return {
        "schema_version": 1,
        "node": node,
        "instance_type": instance_type,
        "verdict": verdict,
        "checks": checks,
    }


def fleet(
    n: int,
    *,
    sd: float,
    outliers: dict[str, float] | None = None,
    seed: int = 7,
    devices: int = 2,
    scale: float = 1.0,
    healthy: float = MATMUL,
    instance_type: str = "local",
    unit: str = "GFLOP/s",
) -> dict[str, dict[str, Any]]:
    """n nodes ``node-00001``…; ``outliers``: node -> gap % its slow device's true matmul rate is
    under ``healthy`` (its other devices stay healthy). ``scale`` multiplies every true figure
    (0.6: a whole batch 40 % slow)."""
    rng = random.Random(seed)
    out: dict[str, dict[str, Any]] = {}
    for i in range(1, n + 1):
        name = f"node-{i:05d}"
        gap = (outliers or {}).get(name, 0.0)
        true = healthy * scale
        rates = [rng.gauss(true, true * sd) for _ in range(devices)]
        if gap:
            slow = true * (1 - gap / 100)
            rates[0] = rng.gauss(slow, slow * sd)
        write = rng.gauss(WRITE * scale, WRITE * scale * sd)
        out[name] = report(name, matmul=rates, write=write, instance_type=instance_type, unit=unit)
    return out
