"""benchmarks/gpu_device_check.sh, dry run on the CPU path: the script that certifies the GPU paths
on a real GPU runs its every step here (the GPU-only checks skip, nccl-tests is not built), so its
control flow, its reading of the suite's reports and its fault-hook verdicts are tested without one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_device_check_dry_run_passes_and_catches_every_fault_hook(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    proc = subprocess.run(
        [str(ROOT / "benchmarks" / "gpu_device_check.sh"), "--dry-run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=590,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines[-1].startswith("gpu-device-check: PASS ") and "on CPU (dry run)" in lines[-1]
    result = json.loads((tmp_path / "device-check.json").read_text())
    steps = {s["name"]: s for s in result["steps"]}
    for hook in ("nondeterministic", "vanished-device", "corrupt-checkpoint", "drop-optimizer"):
        assert steps[f"fault {hook}"]["ok"] is True, steps[f"fault {hook}"]["detail"]
    assert "0 process(es) left" in steps["fault vanished-device"]["detail"]
    assert (
        steps["fault competing-process"]["detail"].startswith("fail")
        or steps["fault competing-process"]["ok"] is None
    )
    assert steps["check matmul-burnin"]["ok"] and steps["check checkpoint-restart"]["ok"]
    assert steps["nccl-tests"]["ok"] is None and "dry run" in steps["nccl-tests"]["detail"]
    rates = result["figures"]
    assert rates["matmul.rate_with_check_median"]["value"] <= rates["matmul.rate_median"]["value"]
