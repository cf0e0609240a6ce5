"""One rank of the benchmark's data-parallel training run (torch DDP), each step timed by part.

Started by ``node.py`` once per rank (``--rank``, ``--local-rank``); ranks meet at the job's
first node (``tcp://<address>:<port>``): NCCL on GPUs, gloo on CPU nodes. bf16 autocast where the
GPU supports it; fp32 on CPUs (most have no bf16 matmul units: autocast there measures the
emulation, not the node). Every rank reads its own samples from the dataset on shared storage
through torch's DataLoader (``train.loader_workers`` processes).

Each step is split into the parts the report attributes the step time to:
  data_wait     blocked on the loader for the next batch
  forward       forward pass and loss
  backward      backward pass up to the end of DDP's gradient synchronisation
  exposed_comm  the part of ``backward`` after this rank's last gradient bucket was ready: time
                spent waiting for all-reduces that compute no longer hides (on the last rank
                to arrive this is pure communication; on the others it includes waiting for it)
  comm          every bucket's all-reduce from its start to its completion, hidden or not (gloo
                only: NCCL futures complete in stream order, so CPU times would not say when)
  optimizer     optimizer step and zeroing the gradients
  checkpoint    every ``checkpoint_every`` steps: each rank saves its share of the model and
                optimizer state to shared storage (fsync), then a barrier
  step          the whole step (wall clock), the sum of the above and the loop's own overhead
Times come from ``time.perf_counter`` on CPUs and CUDA events on GPUs (one synchronisation at
the end of each step). One JSON line per step, flushed: a hung rank's file says how far it got.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import warnings
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel

from validators.workloads.benchmark import data as dataset
from validators.workloads.benchmark.model import build, flops_per_token, parameter_count

warnings.filterwarnings("ignore")


class Clock:
    """Stamps and the seconds between them: perf_counter on CPU, CUDA events on a GPU."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda

    def stamp(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def between(self, a: Any, b: Any) -> float:
        return a.elapsed_time(b) / 1000.0 if self.cuda else b - a

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


class BucketTimes:
    """DDP comm hook that notes when each gradient bucket was ready and when its all-reduce ended."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.ready: List[Any] = []  # stamps, in the order buckets became ready
        self.spans: List[float] = []  # CPU seconds from a bucket's start to its completion

    def reset(self) -> None:
        self.ready, self.spans = [], []

    # No annotations: DDP's register_comm_hook rejects any but its own types, and with postponed
    # evaluation those would be strings.
    def hook(self, state, bucket):
        self.ready.append(self.clock.stamp())
        started = time.perf_counter()
        future = allreduce_hook(state, bucket)

        def done(fut: Any) -> Any:
            self.spans.append(time.perf_counter() - started)
            value = fut.value()
            return value[0] if isinstance(value, list) else value

        return future.then(done)


def to_tokens(samples: List[bytes], seq_len: int, vocab: int) -> torch.Tensor:
    """A batch of samples -> (batch, seq_len + 1) token ids: each sample's first bytes as uint16."""
    need = 2 * (seq_len + 1)
    raw = b"".join(s[:need] for s in samples)
    ids = torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64) & 0xFFFF
    return (ids % vocab).view(len(samples), seq_len + 1)


class Collate:
    """Picklable collate function (DataLoader workers may be spawned)."""

    def __init__(self, seq_len: int, vocab: int) -> None:
        self.seq_len, self.vocab = seq_len, vocab

    def __call__(self, samples: List[bytes]) -> torch.Tensor:
        return to_tokens(samples, self.seq_len, self.vocab)


class Trainer:
    """The model, optimizer and loader of one rank; ``step()`` runs one timed step."""

    def __init__(
        self, job: Dict[str, Any], rank: int, world: int, local_rank: int, instrument: bool = True
    ) -> None:
        """``instrument=False``: no comm hook (DDP's own all-reduce), for the overhead benchmark's
        reference step (benchmarks/benchmark_instrumentation.py)."""
        train, model_cfg = job["train"], job["model"]
        self.job, self.rank, self.world = job, rank, world
        self.cuda = job.get("device") == "cuda"
        self.device = torch.device(f"cuda:{local_rank}" if self.cuda else "cpu")
        if self.cuda:
            torch.cuda.set_device(self.device)
        self.bf16 = self.cuda and job.get("dtype") == "bf16" and torch.cuda.is_bf16_supported()
        self.clock = Clock(self.cuda)
        model = build(model_cfg).to(self.device)
        ids = [local_rank] if self.cuda else None
        self.model = DistributedDataParallel(
            model, device_ids=ids, bucket_cap_mb=float(train.get("bucket_mb", 25))
        )
        self.buckets = BucketTimes(self.clock)
        if instrument:
            self.model.register_comm_hook(None, self.buckets.hook)
        self.optim = torch.optim.AdamW(self.model.parameters(), lr=1e-4, weight_decay=0.01)
        self.seq_len, self.vocab = int(model_cfg["seq_len"]), int(model_cfg["vocab"])
        self.micro_batch = int(train["micro_batch"])
        self.ckpt_every = int(train.get("checkpoint_every") or 0)
        self.ckpt_dir = os.path.join(job["out"], "checkpoint")
        total = int(train["warmup_steps"]) + int(train["steps"])
        self.batches = iter(self._loader(job, total))
        self.measured = 0

    def _loader(self, job: Dict[str, Any], steps: int) -> Any:
        samples = dataset.Samples(job["data"]["path"])
        need = steps * self.micro_batch
        # rank-strided, wrapping round a dataset smaller than the run
        order = [(k * self.world + self.rank) % len(samples) for k in range(need)]
        workers = int(self.job["train"].get("loader_workers", 1))
        return torch.utils.data.DataLoader(
            samples,  # type: ignore[arg-type]  # map-style: __getitem__ and __len__, as DataLoader takes it
            batch_size=self.micro_batch,
            sampler=order,
            num_workers=workers,
            collate_fn=Collate(self.seq_len, self.vocab),
            pin_memory=self.cuda,
            prefetch_factor=2 if workers else None,
            persistent_workers=bool(workers),
        )

    def _loss(self, tokens: torch.Tensor) -> torch.Tensor:
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            logits = self.model(tokens[:, :-1])
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), tokens[:, 1:].reshape(-1))

    def plain_step(self) -> None:
        """The same step without any timing (the instrumentation-overhead benchmark's reference)."""
        tokens = next(self.batches).to(self.device, non_blocking=True)
        self._loss(tokens).backward()
        self.optim.step()
        self.optim.zero_grad(set_to_none=True)
        self.clock.sync()

    def step(self, index: int, warmup: bool) -> Dict[str, Any]:
        clock = self.clock
        self.buckets.reset()
        wall0 = time.perf_counter()
        tokens = next(self.batches).to(self.device, non_blocking=True)
        data_wait = time.perf_counter() - wall0
        t0 = clock.stamp()
        loss = self._loss(tokens)
        t1 = clock.stamp()
        loss.backward()
        t2 = clock.stamp()
        self.optim.step()
        self.optim.zero_grad(set_to_none=True)
        t3 = clock.stamp()
        checkpoint = 0.0
        if not warmup:
            self.measured += 1
            if self.ckpt_every and self.measured % self.ckpt_every == 0:
                clock.sync()
                c0 = time.perf_counter()
                self.save(index)
                checkpoint = time.perf_counter() - c0
        clock.sync()
        wall = time.perf_counter() - wall0
        last = self.buckets.ready[-1] if self.buckets.ready else None
        return {
            "kind": "step",
            "i": index,
            "warmup": warmup,
            "data_wait": data_wait,
            "forward": clock.between(t0, t1),
            "backward": clock.between(t1, t2),
            "exposed_comm": clock.between(last, t2) if last is not None else 0.0,
            "comm": None if self.cuda else sum(self.buckets.spans),
            "buckets": len(self.buckets.ready),
            "optimizer": clock.between(t2, t3),
            "checkpoint": checkpoint,
            "step": wall,
            "loss": float(loss.detach()),
        }

    def save(self, index: int) -> None:
        """This rank's share of parameters and optimizer state (every world-th tensor), fsynced."""
        folder = os.path.join(self.ckpt_dir, f"step-{index}")
        os.makedirs(folder, exist_ok=True)
        params = list(self.model.module.state_dict().items())
        optim = self.optim.state_dict()
        state = {
            "model": {k: v for i, (k, v) in enumerate(params) if i % self.world == self.rank},
            "optim": {k: v for k, v in optim["state"].items() if int(k) % self.world == self.rank},
        }
        path = os.path.join(folder, f"rank-{self.rank}.pt")
        with open(path, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        dist.barrier()


def emit(out: Any, record: Dict[str, Any]) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()


def run(
    job: Dict[str, Any], rank: int, local_rank: int, out: Any, init: Optional[Callable[[], None]] = None
) -> int:
    train = job["train"]
    nodes = job["nodes"]
    world = len(nodes) * int(job.get("ranks_per_node", 1))
    threads = int(train.get("threads") or 0)
    if threads:
        torch.set_num_threads(threads)
    backend = "nccl" if job.get("device") == "cuda" else "gloo"
    if init is not None:
        init()
    else:
        dist.init_process_group(
            backend,
            init_method=f"tcp://{nodes[0]['address']}:{int(job['port'])}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=float(train.get("collective_timeout_s", 120))),
        )
    trainer = Trainer(job, rank, world, local_rank)
    cfg = job["model"]
    emit(
        out,
        {
            "kind": "start",
            "rank": rank,
            "local_rank": local_rank,
            "world": world,
            "host": socket.gethostname(),
            "backend": backend,
            "device": torch.cuda.get_device_name(trainer.device) if trainer.cuda else "cpu",
            "dtype": "bf16" if trainer.bf16 else "fp32",
            "threads": torch.get_num_threads(),
            "params": parameter_count(cfg),
            "flops_per_token": flops_per_token(cfg),
            "tokens_per_step": trainer.micro_batch * int(cfg["seq_len"]),
            "torch": torch.__version__,
        },
    )
    warm, steps = int(train["warmup_steps"]), int(train["steps"])
    started = time.perf_counter()
    for i in range(warm + steps):
        emit(out, trainer.step(i, warmup=i < warm))
    emit(out, {"kind": "end", "steps": steps, "seconds": time.perf_counter() - started})
    dist.destroy_process_group()
    return 0


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="benchmark.train")
    ap.add_argument("--config", required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--local-rank", type=int, default=0)
    args = ap.parse_args(argv)
    with open(args.config) as fh:
        job = json.load(fh)
    return run(job, args.rank, args.local_rank, sys.stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
