"""gloo-allreduce with peers: two nodes (two suites on this machine) meet over TCP, both must pass."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, tiny_cpu_config

pytest.importorskip("torch")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_with_peers_both_pass_and_rank_0_judges_busbw(tmp_path: Path) -> None:
    port = free_port()
    procs = {}
    for me, other in (("node-001", "node-002"), ("node-002", "node-001")):
        cfg = tiny_cpu_config(tmp_path)
        cfg.update(node=me, peers=[{"name": other, "address": "127.0.0.1"}], nccl={"port": port})
        cfg["thresholds"] = {"gloo.all_reduce.2node.busbw_gbps": 0.001}
        cfg["durations"]["peer_timeout_seconds"] = 60
        path = tmp_path / f"{me}.json"
        path.write_text(json.dumps(cfg))
        argv = [
            sys.executable,
            "-m",
            "validators",
            "run",
            "--profile",
            "quick",
            "--checks",
            "gloo-allreduce",
            "--config",
            str(path),
            "--out",
            str(tmp_path / me),
        ]
        procs[me] = subprocess.Popen(
            argv, cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    outputs = {me: p.communicate(timeout=180) for me, p in procs.items()}
    for me, p in procs.items():
        assert p.returncode == 0, (me, outputs[me])
    rank0 = json.loads((tmp_path / "node-001" / "report.json").read_text())["checks"][0]
    rank1 = json.loads((tmp_path / "node-002" / "report.json").read_text())["checks"][0]
    assert rank0["id"] == "gloo-allreduce" and rank0["status"] == "pass", rank0["summary"]
    assert rank0["metrics"]["ranks"]["value"] == 2 and rank0["metrics"]["busbw"]["value"] > 0
    assert rank0["threshold"] == {"gloo.all_reduce.2node.busbw_gbps": {"value": 0.001, "unit": "GB/s"}}
    assert rank1["status"] == "pass" and rank1["summary"].startswith("rank 1 of 2: all_reduce correct")
