"""Validators figures: suite start-up time and checkpoint write/read rates vs plain sequential I/O.

    .venv/bin/python benchmarks/validators_startup.py [--runs 7] [--width 1024] [--path DIR]

Start-up: median wall time of ``python -m validators list`` over N runs, side by side with a bare
``python -c pass`` (same interpreter, interleaved), printed as a ratio: the cost of the stdlib
core and the registry import, which every node pays before any check runs.

Checkpoint: one real checkpoint-restart check (CPU, torch) on PATH (default: a temp dir) with a
model of WIDTH; prints the checkpoint's write and read rates and their ratios to a plain
sequential write (fsync) / read of the same size on the same path. Machines here are shared and
noisy: read the ratios, not the absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def startup(runs: int) -> None:
    suite, bare = [], []
    for _ in range(runs):  # interleaved, so load changes hit both alike
        bare.append(wall([sys.executable, "-c", "pass"]))
        suite.append(wall([sys.executable, "-m", "validators", "list"]))
    s, b = statistics.median(suite), statistics.median(bare)
    print(
        f"start-up: `validators list` median {s * 1000:.0f} ms, bare python median {b * 1000:.0f} ms "
        f"over {runs} runs: ratio {s / b:.2f}"
    )


def checkpoint(width: int, path: str) -> None:
    from validators.checks.base import Context
    from validators.checks.checkpoint import CheckpointRestart
    from validators.config import parse_config
    from validators.runner import run_command
    from validators.suite import run_check

    cfg = {
        "schema_version": 1,
        "node": "bench",
        "instance_type": "local",
        "shared_storage": {"path": path, "require_mount": False},
        "durations": {"checkpoint_steps": 4},
        "sizes": {"checkpoint_width": width},
    }
    result = run_check(CheckpointRestart(), Context(parse_config(cfg, "quick"), "quick", run_command))
    m = {k: v["value"] for k, v in result.metrics.items()}
    print(f"checkpoint-restart: {result.status} ({result.summary})")
    if "ckpt_bytes" in m:
        print(
            f"checkpoint {m['ckpt_bytes'] / 1e6:.1f} MB on {path}: "
            f"write {m['ckpt_write_rate']:.0f} MB/s vs plain {m['plain_write_rate']:.0f} MB/s, ratio {m['write_ratio']:.2f}; "
            f"read {m['ckpt_read_rate']:.0f} MB/s vs plain {m['plain_read_rate']:.0f} MB/s, ratio {m['read_ratio']:.2f}"
        )
    print(json.dumps({"metrics": result.metrics}, indent=None))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--path", default="")
    args = ap.parse_args()
    startup(args.runs)
    if args.path:
        checkpoint(args.width, args.path)
    else:
        with tempfile.TemporaryDirectory(prefix="validators-bench-") as tmp:
            checkpoint(args.width, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
