"""torch.distributed all_reduce with the gloo backend, for gloo-allreduce (the CPU path of NCCL).

``--local-ranks N`` runs N processes on this machine; otherwise this process is ``--rank`` of
``--world-size`` meeting at ``--master ADDR:PORT`` (one process per node, started on every node by
the caller). busbw = bytes / time * 2(n-1)/n, the nccl-tests all_reduce formula. Every element is
checked against the exact expected sum. Each rank prints one JSON object.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import socket
import sys
import time
import warnings
from datetime import timedelta
from typing import Any, List, Optional

warnings.filterwarnings("ignore")


def run_rank(
    rank: int, world: int, master: str, nbytes: int, iters: int, timeout_s: float, queue: Optional[Any]
) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{master}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=timeout_s),
    )
    n = max(1, nbytes // 4)
    expected = float(sum(range(1, world + 1)))
    buf = torch.empty(n, dtype=torch.float32)
    buf.fill_(rank + 1)
    dist.all_reduce(buf)  # warm-up
    wrong = int((buf != expected).sum())
    dist.barrier()
    elapsed = 0.0
    for _ in range(iters):
        buf.fill_(rank + 1)
        start = time.perf_counter()
        dist.all_reduce(buf)
        elapsed += time.perf_counter() - start
        wrong += int((buf != expected).sum())  # checked outside the timed span
    dist.destroy_process_group()
    seconds = elapsed / iters
    algbw = n * 4 / seconds / 1e9
    result = {
        "rank": rank,
        "ranks": world,
        "bytes": n * 4,
        "iterations": iters,
        "time_us": seconds * 1e6,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * 2 * (world - 1) / world,
        "wrong": wrong,
    }
    if queue is not None:
        queue.put(result)
    else:  # every rank reports (its check reads it); rank 0's busbw is the node group's figure
        print(json.dumps(result))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, required=True)
    ap.add_argument("--iterations", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--local-ranks", type=int, default=0)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--master", default="")
    args = ap.parse_args(argv)
    if importlib.util.find_spec("torch") is None:  # say it once, before spawning workers that would each fail
        print(json.dumps({"error": f"torch is not installed for {sys.executable}"}))
        return 3
    if args.local_ranks:
        master = f"127.0.0.1:{free_port()}"
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [
            ctx.Process(
                target=run_rank,
                args=(r, args.local_ranks, master, args.bytes, args.iterations, args.timeout, queue),
            )
            for r in range(args.local_ranks)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(args.timeout + 60)
        bad = [p.exitcode for p in procs if p.exitcode != 0]
        if bad:
            print(json.dumps({"error": f"local ranks exited with {bad}"}))
            return 1
        results = sorted((queue.get() for _ in procs), key=lambda r: r["rank"])
        out = dict(results[0])
        out["wrong"] = sum(r["wrong"] for r in results)
        out["busbw_gbps"] = min(r["busbw_gbps"] for r in results)
        print(json.dumps(out))
        return 0
    run_rank(args.rank, args.world_size, args.master, args.bytes, args.iterations, args.timeout, None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
