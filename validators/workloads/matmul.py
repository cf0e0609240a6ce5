"""Sustained matmul on every device, for matmul-burnin.

One process per device (a GPU, or on the CPU path a single-threaded worker). Each computes the
same product A @ B from the same seed for ``--seconds``, compares every repetition's result with
its first one bit for bit, and reports its rate and a sha256 of the result so the caller can
compare devices. Prints one JSON object.

``--perturb-device I`` is the ``nondeterministic`` fault-injection hook (validators/faults.py,
tests only): device I changes one element of its second repetition's result by one ulp, as a
device with flaky arithmetic would, and the caller must catch it.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.util
import json
import multiprocessing as mp
import os
import sys
import time
import warnings
from typing import Any, Callable, Dict, List

warnings.filterwarnings("ignore")


def worker(
    index: int, device_type: str, dim: int, seconds: float, queue: Any, barrier: Any, perturb: bool = False
) -> None:
    try:
        queue.put(_work(index, device_type, dim, seconds, barrier, perturb))
    except Exception as exc:  # noqa: BLE001 - reported, not raised: the parent must name the device
        queue.put({"index": index, "error": f"{type(exc).__name__}: {exc}"})


def _one_ulp(c: Any) -> Any:
    """``c`` with its first element moved to the next representable value (its bits + 1)."""
    import torch

    bits = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[c.dtype]
    c = c.clone()
    c.view(-1).view(bits)[0] += 1
    return c


def _no_sync() -> None:
    """The CPU path's stand-in for torch.cuda.synchronize: CPU work is done when it returns."""


def _work(
    index: int, device_type: str, dim: int, seconds: float, barrier: Any, perturb: bool
) -> Dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    if device_type == "cuda":
        device = torch.device("cuda", index)
        torch.cuda.set_device(device)
        dtype = torch.bfloat16
        sync: Callable[[], None] = torch.cuda.synchronize
    else:
        device, dtype = torch.device("cpu"), torch.float32
        sync = _no_sync

    gen = torch.Generator().manual_seed(4242)
    a = torch.randn(dim, dim, generator=gen).to(device=device, dtype=dtype)
    b = torch.randn(dim, dim, generator=gen).to(device=device, dtype=dtype)
    first = a @ b  # warm-up, and the reference every repetition must equal
    sync()
    barrier.wait()  # all devices start timing together: a late starter must not look fast
    reps = mismatches = 0
    differing: Dict[str, Any] = {}
    start = time.perf_counter()
    while True:
        c = a @ b
        reps += 1
        if perturb and reps == 2:
            c = _one_ulp(c)
        if not torch.equal(c, first):
            mismatches += 1
            if not differing:
                diff = (c.float() - first.float()).abs()
                differing = {
                    "elements": int((diff > 0).sum().item()),
                    "max_abs_diff": float(diff.max().item()),
                }
        if reps % 4 == 0:
            sync()
            if time.perf_counter() - start >= seconds:
                break
    sync()
    elapsed = time.perf_counter() - start
    data = first.to("cpu").contiguous()
    raw = ctypes.string_at(data.data_ptr(), data.nelement() * data.element_size())
    return {
        "index": index,
        "reps": reps,
        "seconds": elapsed,
        "gflops": 2.0 * dim**3 * reps / elapsed / 1e9,
        "mismatches": mismatches,
        "first_mismatch": differing,
        "digest": hashlib.sha256(raw).hexdigest(),
        "dtype": str(dtype).replace("torch.", ""),
    }


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device-type", choices=("cpu", "cuda"), required=True)
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--perturb-device", type=int, default=-1, help="fault-injection hook (tests only)")
    args = ap.parse_args(argv)
    if importlib.util.find_spec("torch") is None:  # say it once, before spawning workers that would each fail
        print(json.dumps({"error": f"torch is not installed for {sys.executable}"}))
        return 3
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    barrier = ctx.Barrier(args.devices)
    procs = [
        ctx.Process(
            target=worker,
            args=(i, args.device_type, args.dim, args.seconds, queue, barrier, i == args.perturb_device),
        )
        for i in range(args.devices)
    ]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    results.sort(key=lambda r: r["index"])
    print(json.dumps({"device_type": args.device_type, "dim": args.dim, "devices": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
