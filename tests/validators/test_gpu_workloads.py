"""The GPU paths, on a machine that has one: bf16 matmul burn-in and checkpoint-restart on cuda."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="no nvidia-smi: no GPU here"),
]


def local_gpus() -> list:
    proc = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"nvidia-smi cannot talk to a GPU: {proc.stdout.strip() or proc.stderr.strip()}")
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def test_gpu_burnin_and_checkpoint_restart_pass(tmp_path: Path) -> None:
    names = local_gpus()
    cfg = {
        "schema_version": 1,
        "node": "gpu-test",
        "instance_type": "this-machine",
        "gpu": {"count": len(names), "model": names[0].split()[-1] if names else "GPU"},
        "shared_storage": {"path": str(tmp_path), "require_mount": False},
        "durations": {"burnin_seconds": 5, "checkpoint_steps": 6, "telemetry_interval_seconds": 1},
        "sizes": {"matmul_dim": 4096, "checkpoint_width": 512, "checkpoint_world_size": min(2, len(names))},
        "thresholds": {"matmul.median_gap_pct": 25},
    }
    config = tmp_path / "node.json"
    config.write_text(json.dumps(cfg))
    proc = run_cli(
        "run",
        "--profile",
        "quick",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "out"),
        "--checks",
        "gpu-inventory,matmul-burnin,checkpoint-restart",
        timeout=600,
    )
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["gpu-inventory"]["status"] == "pass", checks["gpu-inventory"]["summary"]
    assert checks["matmul-burnin"]["status"] == "warn", checks["matmul-burnin"]["summary"]
    assert checks["matmul-burnin"]["summary"].startswith("no threshold matmul.tflops_min")
    assert checks["matmul-burnin"]["metrics"]["rate_median"]["unit"] == "TFLOP/s"
    assert checks["checkpoint-restart"]["status"] == "pass", checks["checkpoint-restart"]["summary"]
    assert checks["checkpoint-restart"]["metrics"]["killed_rc"]["value"] == -9
    assert proc.returncode == 0, proc.stdout + proc.stderr  # matmul warns: no floor set here
