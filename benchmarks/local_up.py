"""Wall time of `invoke up` on the local stack for 1, 2 and 4 compute nodes, and of a re-run.

    .venv/bin/python benchmarks/local_up.py [--nodes 1,2,4] [--repeat 3] [--keep]

Each size and repetition gets a fresh stack (own name, network and state folder), brought up,
brought up again (the re-run: converged, so every node is skipped on its digest and nothing is
certified), then destroyed. Prints per size the median first `up` and re-run over the
repetitions, the fan-out ratio of each size's first `up` to the smallest size's, and the re-run
as a ratio of the first run, and the machine's busy CPU-seconds during each first `up` with the
floor they set (CPU-seconds / cores: that much work cannot take less wall time here). The node
image is built before timing starts. Machines are shared and noisy: read the ratios, measured
side by side in one run, not the absolute seconds.
The last line, for scripts: `local up: rerun/first R, 4/1 nodes F` (R at the largest size, F =
largest size's first `up` over the smallest's; issue 15's goals: R <= 0.15, F <= 1.3).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
INVOKE = str(Path(sys.executable).parent / "invoke")


def spec_file(folder: Path, stack: str, nodes: int, cidr: str) -> Path:
    spec = yaml.safe_load((ROOT / "stacks" / "local.yaml").read_text())
    spec["stack"] = stack
    spec["provider"]["network_cidr"] = cidr
    for pool in spec["node_pools"]:
        if pool["role"] == "gpu":
            pool["count"] = nodes
    path = folder / f"{stack}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def busy_cpu_seconds() -> float:
    """CPU-seconds the whole machine has spent busy since boot (/proc/stat's first line: user nice
    system idle iowait irq softirq steal ...): the nodes' processes are not children of `up`."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    busy = sum(fields) - fields[3] - fields[4]  # everything but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def timed(args: list[str], env: dict[str, str], log: Path) -> tuple[float, int, float]:
    """Wall seconds, exit code and the machine's busy CPU-seconds meanwhile."""
    start, cpu = time.perf_counter(), busy_cpu_seconds()
    with log.open("a") as out:
        rc = subprocess.run(
            [INVOKE, *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    return time.perf_counter() - start, rc.returncode, busy_cpu_seconds() - cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1,2,4", help="compute node counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="fresh stacks per size; medians are reported")
    ap.add_argument("--keep", action="store_true", help="keep the stacks (default: destroy each)")
    args = ap.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]

    sys.path.insert(0, str(ROOT))
    from clusterforge.providers.local import LocalProvider
    from clusterforge.spec.loader import load_spec, stack_path
    from tests.fixtures.nodes import _free_cidr

    spec, _ = load_spec(stack_path("local"))
    provider = LocalProvider()
    print("building/checking the node image (not timed) ...", flush=True)
    provider.image(spec)

    work = Path(tempfile.mkdtemp(prefix="cf-bench-"))
    env = dict(os.environ, CLUSTERFORGE_STATE_DIR=str(work / "state"))
    runs: dict[int, list[tuple[float, float, int, int]]] = {n: [] for n in sizes}
    cpu_s: dict[int, list[float]] = {n: [] for n in sizes}  # busy CPU-seconds of each first `up`
    for rep in range(args.repeat):
        for n in sizes:
            stack = f"bench{os.getpid() % 10000}n{n}r{rep}"
            path = spec_file(work, stack, n, str(_free_cidr(provider.engine(spec))))
            log = work / f"{stack}.log"
            first, rc1, cpu = timed(["up", "--spec", str(path)], env, log)
            rerun, rc2, _ = timed(["up", "--spec", str(path)], env, log)
            runs[n].append((first, rerun, rc1, rc2))
            cpu_s[n].append(cpu)
            print(
                f"{n} node(s), run {rep + 1}/{args.repeat}: up {first:.1f} s (rc {rc1}, {cpu:.0f} busy "
                f"CPU-s), re-run {rerun:.1f} s (rc {rc2}); log {log}",
                flush=True,
            )
            if not args.keep:
                timed(["down", "--spec", str(path), "--yes"], env, log)

    first_s = {n: statistics.median(r[0] for r in runs[n]) for n in sizes}
    rerun_s = {n: statistics.median(r[1] for r in runs[n]) for n in sizes}
    busy = {n: statistics.median(cpu_s[n]) for n in sizes}
    cores = os.cpu_count() or 1
    base = first_s[sizes[0]]
    print()
    print(f"medians of {args.repeat} run(s) per size; CPU-s: the machine busy during the first up")
    print(
        f"{'nodes':>5}  {'up s':>7}  {'vs ' + str(sizes[0]) + ' node':>10}  {'re-run s':>8}  {'re-run/up':>9}"
        f"  {'CPU-s':>7}  {'floor s':>7}  {'floor vs ' + str(sizes[0]):>10}  rc"
    )
    for n in sizes:
        rcs = ",".join(f"{r[2]}/{r[3]}" for r in runs[n])
        print(
            f"{n:>5}  {first_s[n]:>7.1f}  {first_s[n] / base:>10.2f}  {rerun_s[n]:>8.1f}"
            f"  {rerun_s[n] / first_s[n]:>9.2f}  {busy[n]:>7.0f}  {busy[n] / cores:>7.1f}"
            f"  {busy[n] / cores / base:>10.2f}  {rcs}"
        )
    # A first up cannot take less wall time than its busy CPU-seconds spread over every core.
    print(f"floor s = CPU-s / {cores} cores: the least wall time that much work can take on this machine")
    top = sizes[-1]
    print(
        f"local up: rerun/first {rerun_s[top] / first_s[top]:.2f}, "
        f"{top}/{sizes[0]} nodes {first_s[top] / base:.2f}"
    )
    return 0 if all(r[2] == 0 and r[3] == 0 for rs in runs.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
