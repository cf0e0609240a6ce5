"""Deterministic small training run with torch.distributed.checkpoint, for checkpoint-restart.

Modes (rank 0 prints one JSON object on the last stdout line):
  reference  train steps 1..N uninterrupted; print every loss and the final state digests.
  kill       train, save a DCP checkpoint (fsync) after step k, print ``SAVED k`` and keep
             training; the caller SIGKILLs the process group. Never exits on its own after the save.
  resume     load the checkpoint, train k+1..N; print those losses and the final state digests.

``--world-size W`` > 1 runs W ranks (started here as subprocesses) in a process group: gloo on CPU, nccl on GPU
(one GPU per rank). The model is replicated; gradients are summed with all_reduce and averaged;
each rank reads its own batch; the loss printed is the all-reduced mean. DCP writes one shard
per rank. Losses are printed as float.hex (exact), tensors as sha256 of their bytes, so the
caller compares bit for bit without importing torch. Inputs depend only on (step, rank), so a
resumed run sees the same data as the reference.

VALIDATORS_TEST_FAULT=drop-optimizer (tests only) makes ``resume`` ignore the saved optimizer
state: the resume is then not bit-identical and the check must fail.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import warnings
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Dict, List

warnings.filterwarnings("ignore")
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def _is_launcher(argv: List[str]) -> bool:
    """True for the parent of a multi-rank run: it only starts the ranks and needs no torch."""
    if "--rank" in argv or "--world-size" not in argv:
        return False
    try:
        return int(argv[argv.index("--world-size") + 1]) > 1
    except (IndexError, ValueError):
        return False


if TYPE_CHECKING or not _is_launcher(sys.argv[1:]):  # saves a multi-second import in the launcher
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

BATCH = 16


def build(width: int, device: torch.device):
    torch.manual_seed(1234)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width),
        torch.nn.GELU(),
        torch.nn.Linear(width, width),
        torch.nn.GELU(),
        torch.nn.Linear(width, 1),
    ).to(device)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    return model, optim


def batch(step: int, rank: int, width: int, device: torch.device):
    gen = torch.Generator().manual_seed(10_000 + step * 1_000 + rank)
    x = torch.randn(BATCH, width, generator=gen)
    y = torch.randn(BATCH, 1, generator=gen)
    return x.to(device), y.to(device)


def train_step(model, optim, step: int, rank: int, world: int, width: int, device: torch.device) -> str:
    x, y = batch(step, rank, width, device)
    optim.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    if world > 1:
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad.div_(world)
        loss = loss.detach().clone()
        dist.all_reduce(loss)
        loss.div_(world)
    optim.step()
    return float(loss.item()).hex()


def digest(t: torch.Tensor) -> str:
    """sha256 of the tensor's bytes (ctypes: iterating a storage in Python is far too slow)."""
    data = t.detach().to("cpu").contiguous()
    return hashlib.sha256(
        ctypes.string_at(data.data_ptr(), data.nelement() * data.element_size())
    ).hexdigest()


def state_digests(model, optim) -> Dict[str, str]:
    out = {f"param/{n}": digest(p) for n, p in model.named_parameters()}
    names = {id(p): n for n, p in model.named_parameters()}
    for p, st in optim.state.items():
        for key, val in st.items():
            if torch.is_tensor(val):
                out[f"optim/{names[id(p)]}/{key}"] = digest(val)
    return out


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def run(rank: int, world: int, master: str, args: argparse.Namespace) -> int:
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # thread count changes reduction order on CPU
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available() or torch.cuda.device_count() < world:
            print(
                json.dumps(
                    {
                        "error": f"need {world} usable GPU(s) for the nccl path, torch sees "
                        f"{torch.cuda.device_count() if torch.cuda.is_available() else 0}"
                    }
                )
            )
            return 3
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo",
            init_method=f"tcp://{master}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=args.timeout),
        )
    model, optim = build(args.width, device)
    result: Dict[str, Any] = {"mode": args.mode, "device": str(device), "world_size": world}
    first = 1
    if args.mode == "resume":
        msd, osd = get_state_dict(model, optim)
        state: Dict[str, Any] = {"model": msd, "optim": osd, "step": 0}
        start = time.perf_counter()
        dcp.load(state, storage_reader=dcp.FileSystemReader(args.ckpt))
        result["load_seconds"] = time.perf_counter() - start
        result["ckpt_bytes"] = dir_bytes(args.ckpt)
        if os.environ.get("VALIDATORS_TEST_FAULT") == "drop-optimizer":
            model.load_state_dict(state["model"])
            optim = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        else:
            set_state_dict(model, optim, model_state_dict=state["model"], optim_state_dict=state["optim"])
        first = int(state["step"]) + 1
        result["resumed_from"] = first - 1
    losses = {}
    for step in range(first, args.steps + 1):
        losses[step] = train_step(model, optim, step, rank, world, args.width, device)
        if args.mode == "kill" and step == args.save_step:
            msd, osd = get_state_dict(model, optim)
            start = time.perf_counter()
            dcp.save(
                {"model": msd, "optim": osd, "step": step},
                storage_writer=dcp.FileSystemWriter(args.ckpt, sync_files=True),
            )
            if world > 1:
                dist.barrier()  # every shard is on disk before the caller may kill us
            if rank == 0:
                record = {
                    "saved_step": step,
                    "save_seconds": time.perf_counter() - start,
                    "ckpt_bytes": dir_bytes(args.ckpt),
                }
                print(json.dumps(record))
                print(f"SAVED {step}", flush=True)
    if args.mode == "kill":
        # Past the checkpoint: keep the process alive (still "training") until the caller kills it.
        while True:
            time.sleep(1)
    digests = state_digests(model, optim)
    if world > 1:
        every: List[Any] = [None] * world
        dist.all_gather_object(every, digests)
        result["ranks_agree"] = all(d == digests for d in every)
        dist.destroy_process_group()
    result["losses"] = {str(k): v for k, v in losses.items()}
    result["state"] = digests
    if rank == 0:
        print(json.dumps(result), flush=True)
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("reference", "kill", "resume"), required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--save-step", type=int, default=0)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--ckpt", default="")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--master", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rank is not None:
        return run(args.rank, args.world_size, args.master, args)
    if args.world_size <= 1:
        return run(0, 1, "", args)
    try:  # DCP's object collectives (plans, metadata) go through numpy with more than one rank
        import numpy  # noqa: F401
    except ImportError:
        print(
            json.dumps(
                {"error": "numpy is not installed: torch.distributed.checkpoint needs it with world size > 1"}
            )
        )
        return 3
    # One process per rank, in this process's session: the caller's SIGKILL of the group takes all.
    master = f"127.0.0.1:{free_port()}"
    ranks = [
        subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), *argv, "--rank", str(r), "--master", master]
        )
        for r in range(args.world_size)
    ]
    codes = {r: p.wait() for r, p in enumerate(ranks)}
    bad = {r: c for r, c in codes.items() if c != 0}
    if bad:
        print(json.dumps({"error": f"ranks exited with {bad}"}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
