"""Batched generation on one device of one node: tokens/s and per-request latency by batch size.

For each batch size of ``infer.batch_sizes``: ``infer.repeats`` batches of ``infer.prompt_tokens``
random prompt tokens, each generating ``infer.new_tokens`` tokens greedily with a KV cache
(prefill, then one token per pass). Requests of a batch start and finish together (static
batching), so each request's latency is its batch's time; ``ttft`` is the prefill's (time to
the first token). One JSON line per batch; the workstation takes p50/p99 over them and finds the
knee where more batching stops buying throughput and only adds latency. On a GPU node one
process per GPU runs the same sweep at once (``--local-rank``): the node's throughput is their sum.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from typing import Any, Dict, List

import torch

from validators.workloads.benchmark.model import build

warnings.filterwarnings("ignore")


def run(job: Dict[str, Any], local_rank: int, out: Any) -> int:
    cfg, infer = job["model"], job["infer"]
    cuda = job.get("device") == "cuda"
    device = torch.device(f"cuda:{local_rank}" if cuda else "cpu")
    threads = int(job.get("train", {}).get("threads") or 0)
    if threads and not cuda:
        torch.set_num_threads(threads)
    bf16 = cuda and job.get("dtype") == "bf16" and torch.cuda.is_bf16_supported()
    model = build(cfg).to(device).eval()
    if bf16:
        model = model.to(torch.bfloat16)
    prompt_len, new = int(infer["prompt_tokens"]), int(infer["new_tokens"])
    gen = torch.Generator().manual_seed(local_rank)
    out.write(json.dumps({"kind": "start", "local_rank": local_rank, "dtype": "bf16" if bf16 else "fp32",
                          "device": torch.cuda.get_device_name(device) if cuda else "cpu",
                          "torch": torch.__version__}) + "\n")  # fmt: skip
    with torch.inference_mode():
        for batch in infer["batch_sizes"]:
            for r in range(-1, int(infer["repeats"])):  # r = -1: warm-up, not reported
                prompt = torch.randint(0, int(cfg["vocab"]), (int(batch), prompt_len), generator=gen).to(
                    device
                )
                t0 = time.perf_counter()
                logits, caches = model.step(prompt, None)
                token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                if cuda:
                    torch.cuda.synchronize(device)
                ttft = time.perf_counter() - t0
                pos = prompt_len
                for _ in range(new - 1):
                    logits, caches = model.step(token, caches, start=pos)
                    token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
                    pos += 1
                if cuda:
                    torch.cuda.synchronize(device)
                seconds = time.perf_counter() - t0
                if r >= 0:
                    row = {"kind": "batch", "local_rank": local_rank, "batch": int(batch), "repeat": r,
                           "seconds": seconds, "ttft": ttft, "new_tokens": new}  # fmt: skip
                    out.write(json.dumps(row) + "\n")
                    out.flush()
    out.write(json.dumps({"kind": "end"}) + "\n")
    return 0


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="benchmark.infer")
    ap.add_argument("--config", required=True)
    ap.add_argument("--local-rank", type=int, default=0)
    args = ap.parse_args(argv)
    with open(args.config) as fh:
        job = json.load(fh)
    return run(job, args.local_rank, sys.stdout)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
