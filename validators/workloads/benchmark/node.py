"""What a benchmark job runs once per node (``srun --ntasks-per-node=1``), stdlib only.

Reads ``job.json`` (written by the workstation to shared storage), finds this node in its
``nodes`` (``$SLURMD_NODENAME``, else the host name), starts the telemetry sampler, runs this
node's part of the workload and waits for it within ``timeout_s``:

- ``prepare`` (first node only): writes the dataset (data.py) unless it is there;
- ``data``: the loader sweep (data.py);
- ``train``: ``ranks_per_node`` ranks, global rank = node index x ranks_per_node + local rank;
- ``infer`` (first node only): one process per device.

Each process's stdout goes to ``<out>/<name>.jsonl`` and stderr to ``<out>/<name>.err``. At the
end ``<out>/node-<node>.json`` says per process its exit status, whether it was stopped at the
deadline and its last lines of stderr, plus the node's software (Python, torch, kernel, the
validators suite folder). A rank that fails or hangs is named there, with its node; its output
stays in the folder. The training's checkpoints are removed at the end (they are timed, not kept).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

PACKAGE = "validators.workloads.benchmark"


def tail(path: str, lines: int = 12) -> str:
    try:
        with open(path, errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])[-2000:]
    except OSError:
        return ""


def torch_version() -> str:
    """torch's version without importing it (seconds on a small node)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return ""
    text = ""
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "version.py")) as fh:
            text = fh.read()
    except OSError:
        return "unknown"
    match = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
    return match.group(1) if match else "unknown"


def software() -> Dict[str, str]:
    suite = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return {
        "python": platform.python_version(),
        "torch": torch_version(),
        "kernel": platform.release(),
        "validators": os.path.basename(os.path.realpath(suite)),
    }


def this_node(job: Dict[str, Any], given: str) -> Tuple[int, str]:
    names = [n["name"] for n in job["nodes"]]
    for candidate in (given, os.environ.get("SLURMD_NODENAME", ""), socket.gethostname().split(".")[0]):
        if candidate and candidate in names:
            return names.index(candidate), candidate
    return -1, given or os.environ.get("SLURMD_NODENAME", "") or socket.gethostname()


def commands(job: Dict[str, Any], index: int, config: str) -> List[Tuple[str, List[str]]]:
    """(output name, argv) of every process this node runs for the job."""
    py = [sys.executable, "-m"]
    kind = job["workload"]
    per_node = int(job.get("ranks_per_node", 1))
    if kind == "train":
        return [
            (f"rank-{index * per_node + local}",
             [*py, f"{PACKAGE}.train", "--config", config, "--rank", str(index * per_node + local),
              "--local-rank", str(local)])
            for local in range(per_node)
        ]  # fmt: skip
    if index != 0:
        return []
    if kind == "infer":
        return [(f"infer-{local}", [*py, f"{PACKAGE}.infer", "--config", config, "--local-rank", str(local)])
                for local in range(per_node)]  # fmt: skip
    if kind == "data":
        return [("data", [*py, f"{PACKAGE}.data", "sweep", "--config", config])]
    if kind == "prepare":
        d = job["data"]
        return [("prepare", [*py, f"{PACKAGE}.data", "prepare", "--path", d["path"], "--shards", str(d["shards"]),
                             "--samples-per-shard", str(d["samples_per_shard"]),
                             "--sample-bytes", str(d["sample_bytes"])])]  # fmt: skip
    raise ValueError(f"unknown workload {kind!r}")


def stop(proc: "subprocess.Popen[bytes]") -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run(job: Dict[str, Any], config: str, node_name: str) -> Dict[str, Any]:
    out = job["out"]
    os.makedirs(out, exist_ok=True)
    index, name = this_node(job, node_name)
    record: Dict[str, Any] = {
        "kind": "node", "node": name, "index": index, "host": socket.gethostname(),
        "workload": job["workload"], "started": time.time(), "software": software(), "processes": [], "error": "",
    }  # fmt: skip
    if index < 0:
        record["error"] = f"this node ({name}) is not in the job's node list"
        return record
    if job["workload"] in ("train", "infer") and importlib.util.find_spec("torch") is None:
        record["error"] = f"torch is not installed for {sys.executable}"
        return record
    sampler = subprocess.Popen(
        [sys.executable, "-m", f"{PACKAGE}.telemetry", "--out", os.path.join(out, f"telemetry-{name}.jsonl"),
         "--node", name, "--interval", str(job.get("telemetry_interval_s", 0.5))],
        start_new_session=True,
    )  # fmt: skip
    procs: List[Tuple[str, "subprocess.Popen[bytes]", float]] = []
    try:
        for label, argv in commands(job, index, config):
            with (
                open(os.path.join(out, f"{label}.jsonl"), "wb") as so,
                open(os.path.join(out, f"{label}.err"), "wb") as se,
            ):
                procs.append(
                    (
                        label,
                        subprocess.Popen(argv, stdout=so, stderr=se, start_new_session=True),
                        time.monotonic(),
                    )
                )
        deadline = time.monotonic() + float(job.get("timeout_s", 600))
        while any(p.poll() is None for _, p, _ in procs) and time.monotonic() < deadline:
            time.sleep(0.2)
        for label, proc, began in procs:
            timed_out = proc.poll() is None
            stop(proc)
            record["processes"].append({
                "name": label, "rc": proc.returncode, "timed_out": timed_out,
                "seconds": round(time.monotonic() - began, 3),
                "stderr_tail": tail(os.path.join(out, f"{label}.err")) if proc.returncode or timed_out else "",
            })  # fmt: skip
    finally:
        for _, proc, _ in procs:
            stop(proc)
        stop(sampler)
    if index == 0 and job["workload"] == "train":
        # Checkpoints are saved to be timed, not kept: a GPU-sized run writes gigabytes per save. Every
        # rank passed the save's barrier before any could finish, so none is still writing.
        shutil.rmtree(os.path.join(out, "checkpoint"), ignore_errors=True)
    record["finished"] = time.time()
    return record


def write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmark.node")
    ap.add_argument("--config", required=True, help="the job's job.json")
    ap.add_argument(
        "--node", default="", help="this node's name (default: $SLURMD_NODENAME, else the host name)"
    )
    args = ap.parse_args(argv)
    try:
        with open(args.config) as fh:
            job = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"benchmark: cannot read {args.config}: {exc}", file=sys.stderr)
        return 2
    record = run(job, args.config, args.node)
    write_atomic(os.path.join(job["out"], f"node-{record['node']}.json"), json.dumps(record, indent=1))
    failed = record["error"] or any(p["rc"] or p["timed_out"] for p in record["processes"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
