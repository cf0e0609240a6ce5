"""torch.distributed all_reduce with the gloo backend, for gloo-allreduce (the CPU path of NCCL).

``--local-ranks N`` runs N processes on this machine; otherwise this process is ``--rank`` of
``--world-size`` meeting at ``--master ADDR:PORT`` (one process per node, started on every node by
the caller). busbw = bytes / time * 2(n-1)/n, the nccl-tests all_reduce formula. Every element is
checked against the exact expected sum.

``--iterations N`` is the least number of timed all_reduces per size; with ``--min-seconds S`` more
follow until the timed span reaches S (at most ``--max-iterations``): a few iterations of a
millisecond-scale op measure the scheduler's quantum, not the node (on a CPU-quota'd container node 5
iterations of 16 MiB spread 0.27-0.47 GB/s between runs, 30 iterations 0.41-0.50). Every rank runs the
same count: each says how many more it needs, and all run the largest (an all_reduce MAX).

``--bytes B`` is the judged message size; ``--sizes B1,B2,...`` adds a sweep (busbw against
message size, for the report's plot). Every size is measured in ascending order within one process
group. Each rank prints one JSON object: the ``--bytes`` size's figures at the top level (the
largest size when only ``--sizes`` is given), as before, and every size's in ``sizes``:
``[{bytes, time_us, algbw_gbps, busbw_gbps, wrong}, ...]``; the top-level ``wrong`` counts all sizes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import multiprocessing as mp
import socket
import sys
import time
import warnings
from datetime import timedelta
from typing import Any, Dict, List, Optional, Tuple

warnings.filterwarnings("ignore")

PLANNING_ROUNDS = 4  # --min-seconds: how often the count still to run is estimated again


def measure(
    dist: Any,
    torch: Any,
    rank: int,
    world: int,
    nbytes: int,
    iters: int,
    min_seconds: float = 0.0,
    max_iters: int = 0,
) -> Dict[str, Any]:
    """One message size: a warm-up, then at least ``iters`` timed all_reduces (more until
    ``min_seconds`` of timed span, at most ``max_iters``), each result checked."""
    n = max(1, nbytes // 4)
    expected = float(sum(range(1, world + 1)))
    buf = torch.empty(n, dtype=torch.float32)
    buf.fill_(rank + 1)
    dist.all_reduce(buf)  # warm-up
    wrong = int((buf != expected).sum())
    dist.barrier()

    def timed(count: int) -> float:
        nonlocal wrong
        spent = 0.0
        for _ in range(count):
            buf.fill_(rank + 1)
            start = time.perf_counter()
            dist.all_reduce(buf)
            spent += time.perf_counter() - start
            wrong += int((buf != expected).sum())  # checked outside the timed span
        return spent

    elapsed = timed(iters)
    done = iters
    # The first ops are often the slowest, so one estimate falls short: plan again, a few times.
    for _ in range(PLANNING_ROUNDS if min_seconds > 0 else 0):
        wanted = torch.tensor([more_iterations(elapsed, done, min_seconds, max_iters)], dtype=torch.int64)
        dist.all_reduce(wanted, op=dist.ReduceOp.MAX)  # every rank runs the same count
        more = int(wanted.item())
        if more == 0:
            break
        elapsed += timed(more)
        done += more
    seconds = elapsed / done
    algbw = n * 4 / seconds / 1e9
    return {
        "bytes": n * 4,
        "time_us": seconds * 1e6,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * 2 * (world - 1) / world,
        "iterations": done,
        "wrong": wrong,
    }


def more_iterations(elapsed: float, done: int, min_seconds: float, max_iters: int) -> int:
    """How many more iterations reach ``min_seconds`` of timed span at this rank's pace so far,
    without passing ``max_iters`` in all (0 = no cap)."""
    if done <= 0 or elapsed >= min_seconds:
        return 0
    per_op = max(elapsed / done, 1e-9)
    more = math.ceil((min_seconds - elapsed) / per_op)
    return max(0, min(more, max_iters - done)) if max_iters else more


def run_rank(
    rank: int,
    world: int,
    master: str,
    sizes: List[int],
    headline: int,
    pace: Tuple[int, float, int],
    timeout_s: float,
    queue: Optional[Any],
) -> None:
    """``pace``: (least iterations, least timed seconds, most iterations) per size."""
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
    rows = [measure(dist, torch, rank, world, nbytes, *pace) for nbytes in sizes]
    dist.destroy_process_group()
    result = assemble(rank, world, rows, sizes.index(headline))
    if queue is not None:
        queue.put(result)
    else:  # every rank reports (its check reads it); rank 0's busbw is the node group's figure
        print(json.dumps(result))


def assemble(rank: int, world: int, rows: List[Dict[str, Any]], headline: int) -> Dict[str, Any]:
    """One rank's JSON object: the headline size at the top level (its ``iterations`` the count
    timed at that size), every size in ``sizes``."""
    return {
        "rank": rank,
        "ranks": world,
        **rows[headline],
        "wrong": sum(r["wrong"] for r in rows),
        "sizes": rows,
    }


def combine(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Local ranks -> one object: per size the slowest rank's figures, every rank's wrong values."""
    results = sorted(results, key=lambda r: r["rank"])
    rows = []
    for i, first in enumerate(results[0]["sizes"]):
        same = [r["sizes"][i] for r in results]
        rows.append(
            {
                "bytes": first["bytes"],
                "time_us": max(s["time_us"] for s in same),
                "algbw_gbps": min(s["algbw_gbps"] for s in same),
                "busbw_gbps": min(s["busbw_gbps"] for s in same),
                "iterations": max(s.get("iterations", 0) for s in same),  # the same on every rank
                "wrong": sum(s["wrong"] for s in same),
            }
        )
    headline = next(i for i, row in enumerate(rows) if row["bytes"] == results[0]["bytes"])
    return assemble(0, results[0]["ranks"], rows, headline)


def message_sizes(text: str) -> List[int]:
    """``--sizes`` value: comma-separated byte counts, each > 0."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give byte counts, comma-separated (e.g. 1048576,4194304)"
        ) from None
    if not sizes or any(s <= 0 for s in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: every size must be an integer > 0 (bytes)")
    return sizes


def plan_sizes(nbytes: Optional[int], sweep: List[int]) -> tuple:
    """(every size to run, ascending and distinct; the headline size among them)."""
    sizes = sorted({*sweep, *([nbytes] if nbytes else [])})
    return sizes, nbytes or sizes[-1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, help="the judged message size (top-level figures)")
    ap.add_argument("--sizes", type=message_sizes, default=[], help="more sizes to sweep, B1,B2,...")
    ap.add_argument("--iterations", type=int, required=True, help="the least timed all_reduces per size")
    ap.add_argument(
        "--min-seconds", type=float, default=0.0, help="more iterations until this much timed span per size"
    )
    ap.add_argument(
        "--max-iterations",
        type=int,
        default=10000,
        help="no more iterations than this per size for --min-seconds",
    )
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument(
        "--grace",
        type=float,
        default=60,
        help="--local-ranks: seconds past --timeout before ranks are stopped",
    )
    ap.add_argument("--local-ranks", type=int, default=0)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--master", default="")
    args = ap.parse_args(argv)
    if not args.bytes and not args.sizes:
        ap.error("give --bytes and/or --sizes")
    if args.bytes is not None and args.bytes <= 0:
        ap.error(f"--bytes {args.bytes}: must be > 0")
    sizes, headline = plan_sizes(args.bytes, args.sizes)
    if args.iterations < 1 or args.min_seconds < 0 or args.max_iterations < 1:
        ap.error("give --iterations >= 1, --min-seconds >= 0 and --max-iterations >= 1")
    pace = (args.iterations, args.min_seconds, args.max_iterations)
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
                args=(r, args.local_ranks, master, sizes, headline, pace, args.timeout, queue),
            )
            for r in range(args.local_ranks)
        ]
        for p in procs:
            p.start()
        # One deadline for all ranks: the collectives' own timeout, plus the grace for start-up.
        wait = args.timeout + args.grace
        deadline = time.monotonic() + wait
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        stuck = [r for r, p in enumerate(procs) if p.exitcode is None]
        for p in procs:
            if p.is_alive():  # a rank left running would keep this process (and the check) waiting
                p.terminate()
                p.join(10)
        if stuck:
            error = (
                f"local rank(s) {stuck} of {len(procs)} still running after {wait:g} s, stopped"
                " (a starved or hung node: the other ranks' figures are not comparable)"
            )
            print(json.dumps({"error": error}))
            return 1
        failed = {r: p.exitcode for r, p in enumerate(procs) if p.exitcode != 0}
        if failed:
            codes = ", ".join(f"rank {r}: {code}" for r, code in failed.items())
            print(json.dumps({"error": f"local ranks exited with errors ({codes})"}))
            return 1
        print(json.dumps(combine([queue.get() for _ in procs])))
        return 0
    run_rank(args.rank, args.world_size, args.master, sizes, headline, pace, args.timeout, None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
