"""How well the fleet rules separate slow nodes from healthy noise, on simulated fleets.

    .venv/bin/python benchmarks/fleet_rules.py [--nodes 2000] [--sd 1.5] [--type p5.48xlarge] [--trials 3]

Each trial simulates a fleet of NODES nodes of one instance type (clusterforge/certify/fleet/judge.py
judges it with that type's catalogue rules): healthy matmul figures are normal with a relative
spread of SD percent; 1 % of the nodes are outliers whose true figure is GAP percent under the
healthy one, for each GAP of 3, 5, 7, 10, 20, 50 %. Per gap it prints

- detection: outliers the judge flagged (warn or fail), and those it failed (drain);
- false positives: healthy nodes flagged (warn or fail), and those it failed.

The last line is for scripts: ``fleet rules: nodes N, detection at 7 % gap D %, false positives F %``
(D and F count flagged nodes, warn or fail, over every trial; F over all gaps' healthy nodes).
The judge's own wall time is printed too, as a ratio per 1,000 nodes (machines here are shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterforge.catalog import load_hardware  # noqa: E402
from clusterforge.certify.fleet.judge import judge_run  # noqa: E402
from tests.certify.fleet.fleet_sim import fleet  # noqa: E402

GAPS = (3.0, 5.0, 7.0, 10.0, 20.0, 50.0)
HEALTHY = {"local": (46.5, "GFLOP/s")}  # else a GPU type's bf16 TFLOP/s
GPU_HEALTHY = (780.0, "TFLOP/s")


def trial(
    nodes: int, sd: float, kind: str, gap: float, seed: int
) -> tuple[int, int, int, int, int, int, float]:
    """(outliers, flagged, failed, healthy, healthy flagged, healthy failed, judge seconds)."""
    healthy, unit = HEALTHY.get(kind, GPU_HEALTHY)
    step = 100  # every 100th node is an outlier: 1 %
    slow = {f"node-{i:05d}": gap for i in range(step, nodes + 1, step)}
    reports = fleet(
        nodes,
        sd=sd / 100,
        outliers=slow,
        seed=seed,
        devices=1,
        healthy=healthy,
        instance_type=kind,
        unit=unit,
    )
    start = time.perf_counter()
    judged = judge_run(reports, dict.fromkeys(reports, kind), catalog=load_hardware())
    seconds = time.perf_counter() - start
    counts = [0, 0, 0, 0, 0, 0]
    for node, verdict in judged.nodes.items():
        m = next(x for x in verdict.metrics if x.metric == "matmul-burnin.rate")
        base = 0 if node in slow else 3
        counts[base] += 1
        counts[base + 1] += m.status in ("warn", "fail")
        counts[base + 2] += m.status == "fail"
    return (*counts, seconds)  # type: ignore[return-value]  # six counts: mypy sees a list of any length


def pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--sd", type=float, default=1.5, help="healthy spread, percent of the figure")
    parser.add_argument("--type", default="p5.48xlarge", help="instance type whose catalogue rules judge")
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args(argv)
    rules = load_hardware().fleet_rules(args.type)
    print(
        f"{args.type}: warn {rules.warn_gap_pct:g} %, fail {rules.fail_gap_pct:g} %, robust z warn at -{rules.z_warn:g}; "
        f"{args.nodes} nodes, healthy sd {args.sd:g} %, 1 % outliers, {args.trials} trial(s) per gap"
    )
    print(f"{'gap %':>6} {'detected %':>11} {'failed %':>9} {'false pos %':>12} {'false fail %':>13}")
    healthy_total = healthy_flagged = 0
    at7 = (0, 0)
    seconds: list[float] = []
    for gap in GAPS:
        sums = [0] * 6
        for t in range(args.trials):
            *counts, s = trial(args.nodes, args.sd, args.type, gap, seed=1000 * t + int(gap * 10))
            sums = [a + b for a, b in zip(sums, counts, strict=True)]
            seconds.append(s)
        out_n, out_flag, out_fail, ok_n, ok_flag, ok_fail = sums
        healthy_total, healthy_flagged = healthy_total + ok_n, healthy_flagged + ok_flag
        if gap == 7.0:
            at7 = (out_flag, out_n)
        print(
            f"{gap:>6g} {pct(out_flag, out_n):>11.1f} {pct(out_fail, out_n):>9.1f} "
            f"{pct(ok_flag, ok_n):>12.2f} {pct(ok_fail, ok_n):>13.3f}"
        )
    median_s = sorted(seconds)[len(seconds) // 2]
    print(f"judge: median {median_s * 1000:.0f} ms per fleet, {median_s / args.nodes * 1e6:.0f} us per node")
    print(
        f"fleet rules: nodes {args.nodes}, detection at 7 % gap {pct(*at7):.1f} %, "
        f"false positives {pct(healthy_flagged, healthy_total):.2f} %"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
