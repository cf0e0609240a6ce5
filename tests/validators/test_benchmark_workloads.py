"""The benchmark workloads for real on this machine: torch DDP over gloo between two "nodes" on
loopback, inference and the loader sweep through the node driver, and a hung rank named."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clusterforge.benchmark import breakdown
from clusterforge.benchmark.outcome import JobOutput, parse_job
from clusterforge.benchmark.records import parse_infer, parse_loader
from clusterforge.benchmark.sizing import parameter_count

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MODEL = {"vocab": 256, "d_model": 32, "layers": 2, "heads": 4, "seq_len": 16}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job(tmp_path: Path, workload: str, nodes: list[str], **extra: Any) -> Path:
    out = tmp_path / workload
    cfg = {
        "workload": workload, "nodes": [{"name": n, "address": "127.0.0.1"} for n in nodes], "ranks_per_node": 1,
        "device": "cpu", "dtype": "fp32", "port": free_port(), "model": MODEL,
        "train": {"micro_batch": 2, "steps": 4, "warmup_steps": 2, "checkpoint_every": 2, "loader_workers": 1,
                  "threads": 1, "collective_timeout_s": 60},
        "infer": {"batch_sizes": [1, 2], "prompt_tokens": 4, "new_tokens": 4, "repeats": 2},
        "data": {"path": str(tmp_path / "ds"), "shards": 2, "samples_per_shard": 8, "sample_bytes": 4096,
                 "workers": [1, 2], "seconds": 0.3},
        "out": str(out), "timeout_s": 120, "telemetry_interval_s": 0.2, **extra,
    }  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    path = out / "job.json"
    path.write_text(json.dumps(cfg))
    return path


def driver(config: Path, node: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "validators.workloads.benchmark.node", "--config", str(config),
                             "--node", node], cwd=ROOT, env=env)  # fmt: skip


def files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir() if p.is_file()}


def prepare(tmp_path: Path) -> None:
    assert driver(job(tmp_path, "prepare", ["a"]), "a").wait(120) == 0


def test_two_ranks_train_over_gloo_and_every_step_is_timed(tmp_path: Path) -> None:
    prepare(tmp_path)
    config = job(tmp_path, "train", ["a", "b"])
    procs = [driver(config, "a"), driver(config, "b")]
    assert [p.wait(300) for p in procs] == [0, 0]
    got = files(config.parent)
    out = JobOutput("train-2n", "train", ("a", "b"), str(config.parent), "done", "1", got)
    parsed = parse_job(out, 1, 4)
    assert parsed.failures == []
    for rank in parsed.ranks:
        assert rank.start["params"] == parameter_count(MODEL) and rank.start["backend"] == "gloo"
        assert len(rank.measured) == 4 and rank.ended
        for s in rank.measured:
            assert s.backward >= s.exposed_comm >= 0 and s.forward > 0 and s.comm is not None
            assert s.step >= s.data_wait + s.forward + s.backward + s.optimizer + s.checkpoint - 1e-6
    assert sum(1 for s in parsed.ranks[0].measured if s.checkpoint > 0) == 2  # every 2 measured steps
    assert not (config.parent / "checkpoint").exists()  # timed, then removed
    point = breakdown.analyse(parsed.ranks, 2, 2 * MODEL["seq_len"])
    assert point.tokens_per_s > 0 and point.breakdown.step > 0
    tel = parsed.telemetry["a"]
    assert tel.meta["kind"] == "meta" and tel.samples and tel.samples[0].cpu_pct is not None
    assert parsed.nodes["a"].software["torch"]


def test_inference_and_the_loader_sweep_through_the_node_driver(tmp_path: Path) -> None:
    prepare(tmp_path)
    infer = job(tmp_path, "infer", ["a"])
    data = job(tmp_path, "data", ["a"])
    assert driver(infer, "a").wait(300) == 0 and driver(data, "a").wait(120) == 0
    rows = parse_infer((infer.parent / "infer-0.jsonl").read_text())
    assert sorted({r.batch for r in rows}) == [1, 2] and all(r.seconds >= r.ttft > 0 for r in rows)
    loader = parse_loader((data.parent / "data.jsonl").read_text())
    assert [r.workers for r in loader] == [1, 2] and all(r.samples_per_s > 0 for r in loader)


def test_a_rank_whose_peer_never_comes_is_stopped_at_the_deadline_and_named(tmp_path: Path) -> None:
    prepare(tmp_path)
    config = job(tmp_path, "train", ["a", "b"], timeout_s=8)  # node b never starts its rank
    assert driver(config, "a").wait(120) == 1
    got = files(config.parent)
    out = JobOutput("train-2n", "train", ("a", "b"), str(config.parent), "done", "1", got)
    failures = parse_job(out, 1, 4).failures
    assert failures[0].startswith("train-2n: b gave no result")
    assert failures[1].startswith(
        "train-2n: rank 0 on a hung: stopped at the job's deadline before its first step"
    )


def test_the_model_matches_the_workstation_sizing_and_the_cache_gives_the_same_tokens() -> None:
    import torch

    from validators.workloads.benchmark import model

    net = model.build(MODEL).eval()
    assert sum(p.numel() for p in net.parameters()) == parameter_count(MODEL) == model.parameter_count(MODEL)
    prompt = torch.randint(0, MODEL["vocab"], (2, 5))
    with torch.inference_mode():
        logits, caches = net.step(prompt, None)
        nxt = logits[:, -1:].argmax(-1)
        cached, _ = net.step(nxt, caches, start=5)
        full = net(torch.cat([prompt, nxt], dim=1))
    assert torch.allclose(cached[:, -1], full[:, -1], atol=1e-5)
