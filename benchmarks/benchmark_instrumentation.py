"""What timing each training step by part costs the step, as a ratio against the same step untimed.

    .venv/bin/python benchmarks/benchmark_instrumentation.py [--rounds 8] [--steps 10] [--ranks 2]

Runs the benchmark's own training workload (validators/workloads/benchmark/train.py, the CPU
preset model of container nodes: 2 layers, d_model 128, 64 tokens x 8 sequences per rank) with
``--ranks`` gloo ranks on this machine. Each rank builds two identical trainers: one instrumented
as `invoke benchmark` runs it (DDP comm hook noting when each gradient bucket is ready and done,
a clock stamp between parts, one JSON line per step written and flushed to a file) and one plain
(DDP's own all-reduce, no stamps, no output). Steps alternate between the two, each pair in
the other order than the last, so both see the same machine; each step is timed from outside. Prints the median step of each per round and
over all, and the ratio instrumented / plain; then the instrumentation's own operations timed
alone in a tight loop (a bound free of the machine's noise, as a share of the plain step); the
last line, for scripts:
`instrumentation overhead: ratio R (instrumented X ms, plain Y ms, N steps each, goal < 1.03)`.

GPU nodes add one synchronisation per step (CUDA events are read at the step's end); that
path needs a GPU to measure. Machines here are shared and noisy: read the ratio, measured side
by side, not the absolute times.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterforge.benchmark.sizing import CPU_PRESET  # noqa: E402
from validators.workloads.benchmark import data  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank: int, world: int, job: dict[str, Any], rounds: int, steps: int, queue: Any) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from validators.workloads.benchmark.train import Trainer, emit

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{job['port']}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))  # fmt: skip
    timed = Trainer(job, rank, world, 0, instrument=True)
    plain = Trainer(job, rank, world, 0, instrument=False)
    sink = open(os.path.join(job["out"], f"steps-{rank}.jsonl"), "w")  # noqa: SIM115 - open for the whole run
    for i in range(3):  # warm-up both (DDP rebuilds its buckets after the first step)
        timed.step(i, warmup=True)
        plain.plain_step()
    times: dict[str, list[list[float]]] = {"instrumented": [], "plain": []}
    index = 3
    for r in range(rounds):
        got: dict[str, list[float]] = {"instrumented": [], "plain": []}
        for s in range(steps):
            # one of each, alternately first: both see the same moment of a noisy machine
            for kind in ("instrumented", "plain") if (r + s) % 2 == 0 else ("plain", "instrumented"):
                dist.barrier()  # every rank starts the step together: the figure is the step, not the skew
                t0 = time.perf_counter()
                if kind == "instrumented":
                    emit(sink, timed.step(index, warmup=False))
                else:
                    plain.plain_step()
                got[kind].append(time.perf_counter() - t0)
            index += 1
        for kind, values in got.items():
            times[kind].append(values)
    sink.close()
    dist.destroy_process_group()
    queue.put((rank, times))


def direct_cost(buckets: int, repeats: int = 2000) -> float:
    """Seconds per step of the instrumentation's own operations, timed alone in a tight loop (free
    of the machine's noise): the clock stamps, the comm hook's extra work per gradient bucket (a
    timestamp and a completion callback on the all-reduce's future) and one step line written."""
    import torch

    from validators.workloads.benchmark.train import emit

    record = {"kind": "step", "i": 1, "warmup": False, **dict.fromkeys(
        ("data_wait", "forward", "backward", "exposed_comm", "comm", "optimizer", "checkpoint", "step", "loss"),
        0.123456789), "buckets": buckets}  # fmt: skip
    tensor = [torch.zeros(4)]
    with tempfile.TemporaryFile("w") as sink:
        t0 = time.perf_counter()
        for _ in range(repeats):
            stamps = [time.perf_counter() for _ in range(6)]
            for _ in range(buckets):
                fut: Any = torch.futures.Future()
                started = time.perf_counter()
                done = fut.then(lambda f, s=started: (time.perf_counter() - s, f.value()[0])[1])
                fut.set_result(tensor)
                done.wait()
            emit(sink, {**record, "step": stamps[-1] - stamps[0]})
        return (time.perf_counter() - t0) / repeats


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10, help="steps of each kind per round")
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        preset = CPU_PRESET
        total = 3 + args.rounds * args.steps + 4
        path = os.path.join(tmp, "ds")
        data.prepare(
            path,
            preset["data"]["shards"],
            preset["data"]["samples_per_shard"],
            preset["data"]["sample_kib"] * 1024,
        )
        job = {
            "model": preset["model"], "out": tmp, "port": free_port(), "device": "cpu", "dtype": "fp32",
            "train": {**preset["train"], "checkpoint_every": 0, "warmup_steps": 0, "steps": total, "threads": 1},
            "data": {"path": path},
        }  # fmt: skip
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=rank_main, args=(r, args.ranks, job, args.rounds, args.steps, queue))
                 for r in range(args.ranks)]  # fmt: skip
        for p in procs:
            p.start()
        results = dict(queue.get(timeout=3600) for _ in procs)
        for p in procs:
            p.join(60)
        lines = len(Path(tmp, "steps-0.jsonl").read_text().splitlines())
    rank0 = results[0]
    print(f"{'round':>5} {'instrumented ms':>16} {'plain ms':>10} {'ratio':>7}")
    for r in range(args.rounds):
        a = statistics.median(rank0["instrumented"][r]) * 1000
        b = statistics.median(rank0["plain"][r]) * 1000
        print(f"{r + 1:>5} {a:>16.2f} {b:>10.2f} {a / b:>7.3f}")
    inst = statistics.median(t for rnd in rank0["instrumented"] for t in rnd) * 1000
    plain = statistics.median(t for rnd in rank0["plain"] for t in rnd) * 1000
    per_round = [
        statistics.median(i) / statistics.median(p)
        for i, p in zip(rank0["instrumented"], rank0["plain"], strict=True)
    ]
    n = args.rounds * args.steps
    print(f"median of the per-round ratios: {statistics.median(per_round):.3f}; step lines written: {lines}")
    cost = direct_cost(buckets=2)
    print(f"direct cost of the instrumentation alone: {cost * 1e6:.1f} us per step = {100 * cost / (plain / 1000):.3f} % "
          f"of the plain median step")  # fmt: skip
    print(json.dumps({"instrumented_ms": inst, "plain_ms": plain, "ratio": inst / plain, "steps": n}))
    print(f"instrumentation overhead: ratio {inst / plain:.3f} (instrumented {inst:.2f} ms, plain {plain:.2f} ms, "
          f"{n} steps each, goal < 1.03)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
