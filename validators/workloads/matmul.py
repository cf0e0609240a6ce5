"""Sustained matmul on every device, for matmul-burnin.

One process per device (a GPU, or on the CPU path a single-threaded worker). Each computes the
same product A @ B from the same seed for ``--seconds``, compares every repetition's result with
its first one bit for bit, and reports two rates and a sha256 of the result so the caller can
compare devices. Prints one JSON object; exits 1 when a device failed (each one named in it).

Rates: ``gflops`` counts the time of the matmuls alone (CUDA events around each product on a GPU,
the product's own wall time on the CPU); ``gflops_with_check`` the whole loop, comparison and
host synchronisation included (CUDA's ``torch.equal`` ends in ``.item()``, a host sync every
repetition, so the loop rate is under what the device computes).

Nothing waits without a deadline. Every worker says "ready" before the start barrier; a worker
whose device fails before it (set_device, allocation, an Xid) reports the error and breaks the
barrier, so its peers stop at once instead of waiting for it. The parent waits ``--setup-seconds``
for every device to be ready and ``--seconds`` + ``--setup-seconds`` for the run; it notices a
worker that died without a word (SIGKILL, segfault, OOM-kill) from its exit code. On the first
failure the others are told to stop; whatever is still running at the end is killed. Each device's
entry says what happened to it: ``stage`` setup/barrier/run and the error.

Test hooks (validators/faults.py; tests and the GPU device check only):
- ``--perturb-device I`` (``nondeterministic``): device I changes one element of its second
  repetition's result by one ulp, as a device with flaky arithmetic would.
- ``--vanish-device I`` (``vanished-device``): device I asks for a device ordinal past the last
  one before the barrier (CUDA: "invalid device ordinal"), as a GPU fallen off the bus would.
- ``--compete-device I``: no burn-in; run matmuls on device I until killed (the
  ``competing-process`` hook's competitor, started by the check beside the burn-in).
- ``--device-type fake --fake-plan "I=behaviour[@rep],..."``: stand-in devices without torch, for
  tests of this control flow (behaviours: fail-setup, hang-setup, fail-run, hang-run, killed, slow).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.util
import json
import multiprocessing as mp
import os
import queue as queue_mod
import signal
import sys
import threading
import time
import warnings
from typing import Any, Dict, List, Optional, Tuple

warnings.filterwarnings("ignore")

# How long the parent keeps collecting the others' reports after a device failed, before it kills them.
COLLECT_AFTER_FAILURE_S = 10.0
POLL_S = 0.25


class TorchDevice:
    """One GPU (cuda) or one single-threaded CPU worker."""

    def __init__(self, index: int, kind: str, dim: int, vanish: bool = False) -> None:
        self.index, self.kind, self.dim, self.vanish = index, kind, dim, vanish

    def setup(self) -> None:
        import torch

        self.torch = torch
        torch.set_num_threads(1)
        if self.kind == "cuda":
            ordinal = torch.cuda.device_count() + self.index if self.vanish else self.index
            self.device = torch.device("cuda", ordinal)
            torch.cuda.set_device(self.device)
            self.dtype = torch.bfloat16
        else:
            if self.vanish:
                raise RuntimeError(f"device {self.index} vanished before the start (fault injection)")
            self.device, self.dtype = torch.device("cpu"), torch.float32
        gen = torch.Generator().manual_seed(4242)
        self.a = torch.randn(self.dim, self.dim, generator=gen).to(device=self.device, dtype=self.dtype)
        self.b = torch.randn(self.dim, self.dim, generator=gen).to(device=self.device, dtype=self.dtype)
        self.first = self.a @ self.b  # warm-up, and the reference every repetition must equal
        self.sync()
        if self.kind == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._end = torch.cuda.Event(enable_timing=True)

    def sync(self) -> None:
        if self.kind == "cuda":
            self.torch.cuda.synchronize()

    def timed_matmul(self) -> Tuple[Any, float]:
        """One product and the seconds the product alone took."""
        if self.kind == "cuda":
            self._start.record()
            c = self.a @ self.b
            self._end.record()
            self._end.synchronize()
            return c, self._start.elapsed_time(self._end) / 1000.0
        t0 = time.perf_counter()
        c = self.a @ self.b
        return c, time.perf_counter() - t0

    def equal_first(self, c: Any) -> bool:
        return bool(self.torch.equal(c, self.first))

    def mismatch(self, c: Any) -> Dict[str, Any]:
        diff = (c.float() - self.first.float()).abs()
        return {"elements": int((diff > 0).sum().item()), "max_abs_diff": float(diff.max().item())}

    def one_ulp(self, c: Any) -> Any:
        """``c`` with its first element moved to the next representable value (its bits + 1)."""
        torch = self.torch
        bits = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[c.dtype]
        c = c.clone()
        c.view(-1).view(bits)[0] += 1
        return c

    def digest(self) -> str:
        data = self.first.to("cpu").contiguous()
        return hashlib.sha256(
            ctypes.string_at(data.data_ptr(), data.nelement() * data.element_size())
        ).hexdigest()

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).replace("torch.", "")


class FakeDevice:
    """A stand-in device (no torch): a product is a number and a short sleep. It fails as told,
    so the burn-in's control flow (barrier, deadlines, kills, reasons) is tested on any machine."""

    REP_S = 0.002  # wall time of one stand-in product
    GFLOPS = 10.0  # the rate it claims (a quarter of it when "slow")

    def __init__(self, index: int, dim: int, behaviour: str = "ok", at_rep: int = 3) -> None:
        self.index, self.dim, self.behaviour, self.at_rep = index, dim, behaviour, at_rep
        self.reps = 0
        self.dtype_name = "fake"

    def setup(self) -> None:
        if self.behaviour == "fail-setup":
            raise RuntimeError(f"CUDA error: unspecified launch failure on device {self.index} (fake)")
        if self.behaviour == "hang-setup":
            time.sleep(3600)

    def sync(self) -> None:
        return None

    def timed_matmul(self) -> Tuple[Any, float]:
        self.reps += 1
        if self.reps == self.at_rep:
            if self.behaviour == "fail-run":
                raise RuntimeError(f"CUDA error: an illegal memory access on device {self.index} (fake)")
            if self.behaviour == "hang-run":
                time.sleep(3600)
            if self.behaviour == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(self.REP_S)
        rate = self.GFLOPS / (4 if self.behaviour == "slow" else 1)
        return self.dim, 2.0 * self.dim**3 / rate / 1e9

    def equal_first(self, c: Any) -> bool:
        return bool(c == self.dim)

    def mismatch(self, c: Any) -> Dict[str, Any]:
        return {"elements": 1, "max_abs_diff": float(abs(c - self.dim))}

    def one_ulp(self, c: Any) -> Any:
        return c + 1

    def digest(self) -> str:
        return hashlib.sha256(str(self.dim).encode()).hexdigest()


def parse_plan(text: str) -> Dict[int, Tuple[str, int]]:
    """``"2=fail-setup,5=killed@4"`` -> {2: ("fail-setup", 3), 5: ("killed", 4)}."""
    plan: Dict[int, Tuple[str, int]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        index, _, what = part.partition("=")
        behaviour, _, rep = what.partition("@")
        plan[int(index)] = (behaviour, int(rep) if rep else 3)
    return plan


def make_device(index: int, args: argparse.Namespace) -> Any:
    if args.device_type == "fake":
        behaviour, rep = parse_plan(args.fake_plan).get(index, ("ok", 3))
        return FakeDevice(index, args.dim, behaviour, rep)
    return TorchDevice(index, args.device_type, args.dim, vanish=index == args.vanish_device)


def worker(index: int, args: argparse.Namespace, queue: Any, barrier: Any, stop: Any) -> None:
    stage = "setup"
    try:
        device = make_device(index, args)
        device.setup()
        queue.put({"index": index, "ready": True})
        stage = "barrier"
        # All devices start timing together (a late starter must not look fast); a peer that failed
        # breaks the barrier, and nobody waits longer than the setup deadline.
        barrier.wait(timeout=args.setup_seconds)
        stage = "run"
        queue.put(_run(index, device, args, stop))
    except threading.BrokenBarrierError:
        queue.put(
            {
                "index": index,
                "stage": stage,
                "error": "did not start: a peer failed or was not ready in time",
                "after_peer": True,
            }
        )
    except BaseException as exc:  # noqa: BLE001 - reported, not raised: the parent must name the device
        barrier.abort()  # never leave the peers waiting for this device
        queue.put({"index": index, "stage": stage, "error": f"{type(exc).__name__}: {exc}"})


def _run(index: int, device: Any, args: argparse.Namespace, stop: Any) -> Dict[str, Any]:
    reps = mismatches = 0
    matmul_s = 0.0
    differing: Dict[str, Any] = {}
    start = time.perf_counter()
    while True:
        c, took = device.timed_matmul()
        matmul_s += took
        reps += 1
        if index == args.perturb_device and reps == 2:
            c = device.one_ulp(c)
        if not device.equal_first(c):  # outside the timed product: on a GPU it syncs with the host
            mismatches += 1
            if not differing:
                differing = device.mismatch(c)
        if time.perf_counter() - start >= args.seconds or stop.is_set():
            break
    device.sync()
    elapsed = time.perf_counter() - start
    flops = 2.0 * args.dim**3 * reps
    return {
        "index": index,
        "reps": reps,
        "seconds": elapsed,
        "matmul_seconds": matmul_s,
        "gflops": flops / max(matmul_s, 1e-9) / 1e9,
        "gflops_with_check": flops / elapsed / 1e9,
        "mismatches": mismatches,
        "first_mismatch": differing,
        "digest": device.digest(),
        "dtype": device.dtype_name,
        "stopped_early": bool(stop.is_set()) and elapsed < args.seconds,
    }


def _signal_name(code: Optional[int]) -> str:
    if code is None or code >= 0:
        return f"exit code {code}"
    try:
        return f"signal {-code} ({signal.Signals(-code).name})"
    except ValueError:
        return f"signal {-code}"


class Collector:
    """The parent's side: every device's state, every wait bounded."""

    def __init__(
        self, procs: List[Any], queue: Any, barrier: Any, stop: Any, args: argparse.Namespace
    ) -> None:
        self.procs, self.queue, self.barrier, self.stop, self.args = procs, queue, barrier, stop, args
        self.ready: Dict[int, float] = {}
        self.results: Dict[int, Dict[str, Any]] = {}
        self.failed_at: Optional[float] = None

    def _take(self, item: Dict[str, Any]) -> None:
        i = item["index"]
        if item.get("ready"):
            self.ready[i] = time.monotonic()
            return
        self.results[i] = item
        if "error" in item and not item.get("after_peer") and self.failed_at is None:
            self.fail_fast()

    def fail_fast(self) -> None:
        self.failed_at = time.monotonic()
        self.stop.set()
        self.barrier.abort()

    def _drain(self, wait: float) -> None:
        try:
            self._take(self.queue.get(timeout=wait))
            while True:
                self._take(self.queue.get_nowait())
        except queue_mod.Empty:
            pass

    def _dead_without_result(self) -> None:
        for i, p in enumerate(self.procs):
            if i in self.results or p.exitcode is None:
                continue
            self._drain(1.0)  # its last word may still be in the pipe
            if i not in self.results:
                stage = "run" if i in self.ready else "setup"
                self.results[i] = {
                    "index": i,
                    "stage": stage,
                    "error": f"worker died without a result ({_signal_name(p.exitcode)}) during {stage}",
                }
                if self.failed_at is None:
                    self.fail_fast()

    def collect(self) -> None:
        n = len(self.procs)
        begun = time.monotonic()
        setup_deadline = begun + self.args.setup_seconds
        run_deadline: Optional[float] = None
        while len(self.results) < n:
            now = time.monotonic()
            if self.failed_at is not None and now - self.failed_at > COLLECT_AFTER_FAILURE_S:
                break
            # Every device ready or done, each counted once: a peer that was ready and then gave up
            # waiting for a stuck device is in both (on a busy machine its wait can end first).
            if run_deadline is None and len(self.ready.keys() | self.results.keys()) >= n:
                run_deadline = now + self.args.seconds + self.args.setup_seconds
            if run_deadline is None and now > setup_deadline:
                for i in range(n):
                    if i not in self.ready and i not in self.results:
                        self.results[i] = {
                            "index": i,
                            "stage": "setup",
                            "error": f"not ready within {self.args.setup_seconds:g} s (stuck in CUDA init or allocation)",
                        }
                self.fail_fast()
                continue
            if run_deadline is not None and now > run_deadline:
                for i in range(n):
                    if i not in self.results:
                        self.results[i] = {
                            "index": i,
                            "stage": "run",
                            "error": f"no result {self.args.seconds + self.args.setup_seconds:g} s after the start (hung)",
                        }
                break
            self._drain(POLL_S)
            self._dead_without_result()
        for i in range(n):
            self.results.setdefault(
                i,
                {
                    "index": i,
                    "stage": "run" if i in self.ready else "setup",
                    "error": "stopped: another device failed (killed)",
                    "after_peer": True,
                },
            )

    def end(self) -> None:
        """Nothing outlives the burn-in: a worker still running now is killed and reaped."""
        for p in self.procs:
            p.join(timeout=2.0 if self.failed_at is None else 0.1)
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join(timeout=5.0)


def compete(args: argparse.Namespace) -> int:
    """The competing-process hook's competitor: matmuls on one device until killed."""
    device = TorchDevice(args.compete_device, args.device_type, args.dim)
    device.setup()
    print(json.dumps({"competing": args.compete_device}), flush=True)
    while True:
        device.timed_matmul()


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device-type", choices=("cpu", "cuda", "fake"), required=True)
    ap.add_argument("--devices", type=int, required=True)
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument(
        "--setup-seconds", type=float, default=120.0, help="deadline for every device to be ready"
    )
    ap.add_argument("--perturb-device", type=int, default=-1, help="fault-injection hook (tests only)")
    ap.add_argument("--vanish-device", type=int, default=-1, help="fault-injection hook (tests only)")
    ap.add_argument("--compete-device", type=int, default=-1, help="fault-injection hook (tests only)")
    ap.add_argument("--fake-plan", default="", help="stand-in devices' faults (tests only)")
    args = ap.parse_args(argv)
    if args.device_type != "fake" and importlib.util.find_spec("torch") is None:
        # say it once, before spawning workers that would each fail
        print(json.dumps({"error": f"torch is not installed for {sys.executable}"}))
        return 3
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.compete_device >= 0:
        return compete(args)
    ctx = mp.get_context("spawn")
    queue, stop = ctx.Queue(), ctx.Event()
    barrier = ctx.Barrier(args.devices)
    procs = [ctx.Process(target=worker, args=(i, args, queue, barrier, stop)) for i in range(args.devices)]
    collector = Collector(procs, queue, barrier, stop, args)
    try:
        for p in procs:
            p.start()
        collector.collect()
    finally:
        collector.end()
    results = [collector.results[i] for i in sorted(collector.results)]
    print(json.dumps({"device_type": args.device_type, "dim": args.dim, "devices": results}))
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
