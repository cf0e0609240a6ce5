"""Per-node telemetry during a benchmark job (stdlib only): one JSON line per sample.

What a node gives, read cheaply every ``--interval`` seconds until SIGTERM:
- CPU: cores busy from the node's cgroup (cgroup v1 ``cpuacct.usage``, v2 ``cpu.stat``
  ``usage_usec``; a container's own), against the cores it may use (CFS quota, else its CPUs);
- memory in use (cgroup ``memory.usage_in_bytes`` / ``memory.current``, else /proc/meminfo);
- network: bytes/s received and sent over every interface but ``lo`` (/proc/net/dev);
- GPUs (where ``nvidia-smi`` answers): utilisation %, memory used, power draw per GPU;
- power: the GPUs' draw; on CPU nodes RAPL (``/sys/class/powercap/intel-rapl:0``) where it is
  readable, else none, and the first line says why.

The first line (``kind: meta``) says what could be sampled and why not; samples have ``t``,
seconds since the sampler started.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

CGROUP = "/sys/fs/cgroup"
RAPL = "/sys/class/powercap/intel-rapl:0/energy_uj"
GPU_QUERY = (
    "nvidia-smi",
    "--query-gpu=index,utilization.gpu,memory.used,power.draw",
    "--format=csv,noheader,nounits",
)


def read(path: str) -> Optional[str]:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def cpu_usage_s(root: str = CGROUP) -> Optional[float]:
    """CPU seconds the node's cgroup has used (v1 cpuacct, else v2 cpu.stat)."""
    text = read(os.path.join(root, "cpuacct", "cpuacct.usage"))
    if text is not None and text.strip().isdigit():
        return int(text) / 1e9
    text = read(os.path.join(root, "cpu.stat"))
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec" and value.strip().isdigit():
            return int(value) / 1e6
    return None


def cpu_limit(root: str = CGROUP) -> float:
    """Cores the node may use: its CFS quota (v1 cfs_quota_us/cfs_period_us, v2 cpu.max), else its CPUs."""
    cpus = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    quota, period = (
        read(os.path.join(root, "cpu", "cpu.cfs_quota_us")),
        read(os.path.join(root, "cpu", "cpu.cfs_period_us")),
    )
    if quota and period and quota.strip().lstrip("-").isdigit() and period.strip().isdigit():
        q, p = int(quota), int(period)
        return min(cpus, q / p) if q > 0 and p > 0 else cpus
    text = read(os.path.join(root, "cpu.max"))
    if text:
        parts = text.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit() and int(parts[1]) > 0:
            return min(cpus, int(parts[0]) / int(parts[1]))
    return cpus


def memory_bytes(root: str = CGROUP) -> Optional[int]:
    for path in (os.path.join(root, "memory", "memory.usage_in_bytes"), os.path.join(root, "memory.current")):
        text = read(path)
        if text is not None and text.strip().isdigit():
            return int(text)
    info = parse_meminfo(read("/proc/meminfo") or "")
    if "MemTotal" in info and "MemAvailable" in info:
        return (info["MemTotal"] - info["MemAvailable"]) * 1024
    return None


def parse_meminfo(text: str) -> Dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key.strip()] = int(parts[0])
    return out


def parse_net_dev(text: str) -> Tuple[int, int]:
    """(received, sent) bytes over every interface but lo, from /proc/net/dev."""
    rx = tx = 0
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if name.strip() == "lo" or len(fields) < 9:
            continue
        rx += int(fields[0])
        tx += int(fields[8])
    return rx, tx


def parse_gpu_query(text: str) -> List[Dict[str, Any]]:
    """Rows of GPU_QUERY's CSV: index, utilisation %, memory used MiB, power W ([N/A] -> None)."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or not parts[0].isdigit():
            continue
        rows.append(
            {
                "gpu": int(parts[0]),
                "util_pct": _num(parts[1]),
                "mem_mib": _num(parts[2]),
                "power_w": _num(parts[3]),
            }
        )
    return rows


def _num(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def query_gpus() -> Tuple[List[Dict[str, Any]], str]:
    """Per-GPU rows, or ([], why not)."""
    if shutil.which(GPU_QUERY[0]) is None:
        return [], "no nvidia-smi on this node"
    try:
        proc = subprocess.run(list(GPU_QUERY), capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"nvidia-smi: {exc}"
    rows = parse_gpu_query(proc.stdout)
    if proc.returncode != 0 or not rows:
        detail = " ".join((proc.stdout + proc.stderr).split())[:160]
        return [], f"nvidia-smi exited {proc.returncode}: {detail}"
    return rows, ""


class Sampler:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.start = time.monotonic()
        self.cores = cpu_limit()
        gpus, self.gpu_problem = query_gpus()
        self.gpus = bool(gpus)
        rapl = read(RAPL)
        self.rapl = rapl is not None and rapl.strip().isdigit()
        self.last: Optional[Tuple[float, Optional[float], Tuple[int, int], Optional[int]]] = None

    def meta(self, node: str) -> Dict[str, Any]:
        power = "nvidia-smi power.draw" if self.gpus else ("RAPL package 0" if self.rapl else "")
        return {
            "kind": "meta",
            "node": node,
            "interval_s": self.interval,
            "cpu_limit_cores": round(self.cores, 3),
            "gpu": "nvidia-smi" if self.gpus else self.gpu_problem,
            "power": power or "not available: no GPU and no readable RAPL counter (container nodes)",
        }

    def sample(self) -> Optional[Dict[str, Any]]:
        now = time.monotonic()
        cpu = cpu_usage_s()
        net = parse_net_dev(read("/proc/net/dev") or "")
        energy = int(read(RAPL) or 0) if self.rapl else None
        last, self.last = self.last, (now, cpu, net, energy)
        if last is None:
            return None
        dt = now - last[0]
        if dt <= 0:
            return None
        row: Dict[str, Any] = {"kind": "sample", "t": round(now - self.start, 3)}
        if cpu is not None and last[1] is not None:
            busy = (cpu - last[1]) / dt
            row["cpu_cores"] = round(busy, 3)
            row["cpu_pct"] = round(100 * busy / self.cores, 1) if self.cores else None
        row["mem_bytes"] = memory_bytes()
        row["net_rx_bps"] = round((net[0] - last[2][0]) / dt)
        row["net_tx_bps"] = round((net[1] - last[2][1]) / dt)
        if self.gpus:
            gpus, _ = query_gpus()
            row["gpus"] = gpus
            powers = [g["power_w"] for g in gpus if g["power_w"] is not None]
            row["power_w"] = round(sum(powers), 1) if powers else None
        elif energy is not None and last[3] is not None and energy >= last[3]:
            row["power_w"] = round((energy - last[3]) / 1e6 / dt, 1)
        return row


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(prog="benchmark.telemetry")
    ap.add_argument("--out", required=True)
    ap.add_argument("--node", default="")
    ap.add_argument("--interval", type=float, default=0.5)
    args = ap.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    sampler = Sampler(args.interval)
    with open(args.out, "a") as fh:
        fh.write(json.dumps(sampler.meta(args.node)) + "\n")
        fh.flush()
        sampler.sample()
        while not stop:
            time.sleep(args.interval)
            row = sampler.sample()
            if row is not None:
                fh.write(json.dumps(row) + "\n")
                fh.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
