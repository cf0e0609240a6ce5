"""Deterministic small training run with torch.distributed.checkpoint, for checkpoint-restart.

Modes (one JSON object on the last stdout line):
  reference  train steps 1..N uninterrupted; print every loss and the final state digests.
  kill       train, save a DCP checkpoint (fsync) after step k, print ``SAVED k`` and keep
             training; the caller SIGKILLs it. Never exits on its own after the save.
  resume     load the checkpoint, train k+1..N; print those losses and the final state digests.

Losses are printed as float.hex (exact), tensors as sha256 of their bytes, so the caller
compares bit for bit without importing torch. Inputs depend only on the step number, so a
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
import sys
import time
import warnings
from typing import Any, Dict, List

warnings.filterwarnings("ignore")
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict  # noqa: E402

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


def batch(step: int, width: int, device: torch.device):
    gen = torch.Generator().manual_seed(10_000 + step)
    x = torch.randn(BATCH, width, generator=gen)
    y = torch.randn(BATCH, 1, generator=gen)
    return x.to(device), y.to(device)


def train_step(model, optim, step: int, width: int, device: torch.device) -> str:
    x, y = batch(step, width, device)
    optim.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
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


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("reference", "kill", "resume"), required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--save-step", type=int, default=0)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--ckpt", default="")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # thread count changes reduction order on CPU
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "torch.cuda.is_available() is False: no usable GPU for the nccl path"}))
        return 3
    model, optim = build(args.width, device)
    result: Dict[str, Any] = {"mode": args.mode, "device": str(device)}
    first = 1
    if args.mode == "resume":
        msd, osd = get_state_dict(model, optim)
        state = {"model": msd, "optim": osd, "step": 0}
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
        losses[step] = train_step(model, optim, step, args.width, device)
        if args.mode == "kill" and step == args.save_step:
            msd, osd = get_state_dict(model, optim)
            start = time.perf_counter()
            dcp.save(
                {"model": msd, "optim": osd, "step": step},
                storage_writer=dcp.FileSystemWriter(args.ckpt, sync_files=True),
            )
            save_s = time.perf_counter() - start
            print(
                json.dumps({"saved_step": step, "save_seconds": save_s, "ckpt_bytes": dir_bytes(args.ckpt)})
            )
            print(f"SAVED {step}", flush=True)
    if args.mode == "kill":
        # Past the checkpoint: keep the process alive (still "training") until the caller kills it.
        while True:
            time.sleep(1)
    result["losses"] = {str(k): v for k, v in losses.items()}
    result["state"] = state_digests(model, optim)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
