"""What the passive check (validators/passive.py) costs per run on a node, on fake inputs.

    .venv/bin/python benchmarks/passive_check.py [--runs 30] [--log-lines 20000] [--xid-lines 2000] [--gpus 8]

Each run is what Slurm's HealthCheckProgram does before the quick checks: read the kernel log
(journalctl answered from memory here: a node's own journalctl -k takes its own time, measure
that there), read nvidia-smi (captured H200 output, one GPU copied to --gpus), judge, and write
the state file. The log holds LOG_LINES lines of which XID_LINES are Xid 79 (the captured line
under uptime stamps). The goal (issue 28): under 2 s per run. The last line, for scripts:
``passive check: median M ms per run (log L lines, X Xid lines, G GPUs)``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from validators.passive import run_passive  # noqa: E402

DATA = ROOT / "tests" / "data"


def fake_log(lines: int, xids: int) -> str:
    xid = (DATA / "xid" / "xid79_fallen_off_bus_line.txt").read_text().strip()
    out = []
    every = max(1, lines // max(1, xids))
    for i in range(lines):
        text = (
            xid
            if xids and i % every == 0 and i // every < xids
            else f"usb 1-1: device descriptor read/64, {i}"
        )
        out.append(f"[{1000 + i / 10:12.6f}] {text}")
    return "\n".join(out) + "\n"


def fake_smi(gpus: int) -> str:
    text = (DATA / "nvidia-smi" / "q_550_h200_healthy.txt").read_text()
    head, sep, gpu = text.partition("\nGPU ")
    if not sep:
        return text
    return head + "".join(f"\nGPU {gpu}" for _ in range(gpus))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--log-lines", type=int, default=20000)
    ap.add_argument("--xid-lines", type=int, default=2000)
    ap.add_argument("--gpus", type=int, default=8)
    args = ap.parse_args()
    log, smi = fake_log(args.log_lines, args.xid_lines), fake_smi(args.gpus)

    def runner(argv: list[str], timeout: float) -> tuple[int, str, str]:
        if argv[0] == "journalctl":
            return 0, log, ""
        if argv[0] == "nvidia-smi":
            return 0, smi, ""
        return 127, "", "not found"

    seconds = []
    with tempfile.TemporaryDirectory() as tmp:
        boot = Path(tmp) / "boot_id"
        boot.write_text("bench-boot\n")
        state = str(Path(tmp) / "passive.json")
        for _ in range(args.runs):
            started = time.perf_counter()
            run_passive(state, runner, str(boot))
            seconds.append(time.perf_counter() - started)
    median_ms = statistics.median(seconds) * 1000
    print(f"runs {args.runs}: min {min(seconds) * 1000:.1f} ms, max {max(seconds) * 1000:.1f} ms")
    print(
        f"passive check: median {median_ms:.1f} ms per run "
        f"(log {args.log_lines} lines, {args.xid_lines} Xid lines, {args.gpus} GPUs)"
    )


if __name__ == "__main__":
    main()
