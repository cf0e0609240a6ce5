"""A stand-in for the head node of a stack with Slurm: answers what the benchmark runner asks
(sinfo, writing job files, sbatch, squeue, scancel, reading a job folder back) and "runs" each
job by writing what the node driver and workloads write, from per-node behaviours.

It keeps Slurm's rules the runner depends on: a job on a drained node stays PENDING with
ReqNodeNotAvail; squeue forgets a job once it ends; an sbatch with an unknown node is refused.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from clusterforge.benchmark.runner import READ_FOLDER
from clusterforge.certify.network.jobs import WRITE_FILES
from clusterforge.providers.base import Node
from tests.benchmark.steps import step


@dataclass
class Behaviour:
    """How one node's ranks behave: multipliers on the healthy step parts, or a failure."""

    compute: float = 1.0  # a CPU cap slows forward/backward
    data: float = 0.0  # seconds of data-loader wait per step (a slow storage path)
    comm: float = 0.005  # seconds of exposed all-reduce per step at 2+ nodes (a slow link: more)
    hang_after: int | None = None  # the rank stops writing after this step and is stopped at the deadline
    exit_at: int | None = None  # the rank dies at this step with an error


@dataclass
class FakeHead:
    states: dict[str, str]  # node -> sinfo "%T %E" remainder, e.g. "idle none"
    behaviour: dict[str, Behaviour] = field(default_factory=dict)
    fs: dict[str, str] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    next_id: int = 100

    def runner(self, node: Node, timeout_s: float = 0) -> FakeHead:  # the seam's shape
        return self

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        self.calls.append(argv)
        if argv[:2] == ["sinfo", "-h"]:
            return 0, "".join(f"{n} {s}\n" for n, s in sorted(self.states.items())), ""
        if argv[:2] == ["python3", "-c"] and argv[2] == WRITE_FILES:
            self.fs.update(json.loads(stdin or "{}"))
            return 0, "", ""
        if argv[:2] == ["python3", "-c"] and argv[2] == READ_FOLDER:
            prefix = argv[3].rstrip("/") + "/"
            files = {
                p[len(prefix) :]: t
                for p, t in self.fs.items()
                if p.startswith(prefix) and "/" not in p[len(prefix) :]
            }
            return 0, json.dumps(files), ""
        if argv[0] == "cat":
            return (
                (0, self.fs[argv[1]], "") if argv[1] in self.fs else (1, "", f"cat: {argv[1]}: No such file")
            )
        if argv[0] == "sbatch":
            return self._sbatch(argv)
        if argv[0] == "squeue":
            job = self.jobs.get(argv[argv.index("-j") + 1])
            return 0, (f"{job['state']}|{job['reason']}\n" if job and job["state"] != "done" else ""), ""
        if argv[0] == "scancel":
            for job in self.jobs.values():
                if job["name"] == argv[-1]:
                    job["state"] = "done"
            return 0, "", ""
        return 127, "", f"fake head: unexpected command {argv}"

    def _sbatch(self, argv: list[str]) -> tuple[int, str, str]:
        nodes = argv[argv.index("-w") + 1].split(",")
        unknown = [n for n in nodes if n not in self.states]
        if unknown:
            return 1, "", f"sbatch: error: Invalid node name specified: {unknown[0]}"
        config = shlex.split(argv[argv.index("--wrap") + 1])[-1]
        job = json.loads(self.fs[config])
        job_id = str(self.next_id)
        self.next_id += 1
        drained = [n for n in nodes if not self.states[n].startswith("idle")]
        record = {"name": argv[argv.index("-J") + 1], "state": "done", "reason": "None"}
        if drained:
            record.update(state="PENDING", reason="ReqNodeNotAvail,_UnavailableNodes:" + ",".join(drained))
        else:
            self._run(job)
        self.jobs[job_id] = record
        return 0, f"{job_id}\n", ""

    def _write(self, job: dict[str, Any], name: str, text: str) -> None:
        self.fs[f"{job['out']}/{name}"] = text

    def _run(self, job: dict[str, Any]) -> None:
        kind, names = job["workload"], [n["name"] for n in job["nodes"]]
        if kind == "prepare":
            d = job["data"]
            manifest = {k: d[k] for k in ("shards", "samples_per_shard", "sample_bytes")}
            self.fs[f"{d['path']}/manifest.json"] = json.dumps(manifest)
        for index, node in enumerate(names):
            b = self.behaviour.get(node, Behaviour())
            procs = []
            if kind == "train":
                rank = index
                lines, rc, timed_out, err = self._rank_lines(job, b, len(names))
                self._write(job, f"rank-{rank}.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
                procs.append(
                    {
                        "name": f"rank-{rank}",
                        "rc": rc,
                        "timed_out": timed_out,
                        "seconds": 9.0,
                        "stderr_tail": err,
                    }
                )
            elif kind == "infer" and index == 0:
                rows = [{"kind": "batch", "local_rank": 0, "batch": bs, "repeat": r, "seconds": 0.1 * (1 + bs / 8),
                         "ttft": 0.01, "new_tokens": job["infer"]["new_tokens"]}
                        for bs in job["infer"]["batch_sizes"] for r in range(job["infer"]["repeats"])]  # fmt: skip
                self._write(job, "infer-0.jsonl", "\n".join(json.dumps(x) for x in rows) + "\n")
                procs.append({"name": "infer-0", "rc": 0, "timed_out": False, "seconds": 3.0})
            elif kind == "data" and index == 0:
                rows = [{"kind": "loader", "direct": True, "workers": w, "samples": 10, "bytes": 1,
                         "seconds": 2.0, "samples_per_s": 500.0 * min(w, 2), "mb_per_s": 32.0 * min(w, 2)}
                        for w in job["data"]["workers"]]  # fmt: skip
                self._write(job, "data.jsonl", "\n".join(json.dumps(x) for x in rows) + "\n")
                procs.append({"name": "data", "rc": 0, "timed_out": False, "seconds": 6.0})
            tel = [
                {
                    "kind": "meta",
                    "node": node,
                    "interval_s": 0.5,
                    "cpu_limit_cores": 1.0 / b.compute,
                    "gpu": "no nvidia-smi on this node",
                    "power": "not available",
                }
            ]
            tel += [{"kind": "sample", "t": 0.5 * (k + 1), "cpu_pct": 90.0 / b.compute, "cpu_cores": 0.9,
                     "mem_bytes": 2e8, "net_rx_bps": 1e6 * k, "net_tx_bps": 1e6 * k} for k in range(6)]  # fmt: skip
            self._write(job, f"telemetry-{node}.jsonl", "\n".join(json.dumps(x) for x in tel) + "\n")
            record = {
                "kind": "node",
                "node": node,
                "index": index,
                "processes": procs,
                "error": "",
                "software": {
                    "python": "3.11.2",
                    "torch": "2.13.0+cpu",
                    "kernel": "6.1.0",
                    "validators": "validators-abc",
                },
            }
            self._write(job, f"node-{node}.json", json.dumps(record))  # fmt: skip

    def _rank_lines(self, job: dict[str, Any], b: Behaviour, nodes: int) -> tuple[list[dict], int, bool, str]:
        train = job["train"]
        total = train["warmup_steps"] + train["steps"]
        peers_slow = max((x.compute for x in self.behaviour.values()), default=1.0)
        lines: list[dict] = [{"kind": "start", "rank": 0, "world": nodes}]
        for i in range(total):
            if b.hang_after is not None and i > b.hang_after:
                return lines, -15, True, ""
            if b.exit_at is not None and i == b.exit_at:
                return (
                    lines,
                    1,
                    False,
                    "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access",
                )
            comm = b.comm if nodes > 1 else 0.001
            wait = (0.3 * (peers_slow - b.compute) if nodes > 1 else 0.0) + comm
            s = step(i, data=b.data, fwd=0.1 * b.compute, bwd=0.2 * b.compute, exposed=wait, opt=0.01,
                     warmup=i < train["warmup_steps"])  # fmt: skip
            lines.append({"kind": "step", **{k: getattr(s, k) for k in ("i", "warmup", "data_wait", "forward",
                          "backward", "exposed_comm", "optimizer", "checkpoint", "step", "comm")}})  # fmt: skip
        lines.append({"kind": "end"})
        return lines, 0, False, ""
