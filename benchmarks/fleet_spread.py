"""How much healthy nodes of one type differ: the figures behind the fleet-judging gaps.

    .venv/bin/python benchmarks/fleet_spread.py --stack local [--certify K] [--type local]
    .venv/bin/python benchmarks/fleet_spread.py --baseline FILE

With ``--certify K`` it first runs `invoke certify --stack NAME` K times on the (up, healthy)
stack; every pass adds each node's figures to the stack's stored baseline. Then it reads the
baseline (`.clusterforge/<stack>/baselines/<type>.json`, or ``--baseline FILE``) and prints, per
metric: each node's min / median / max over the runs, the spread between nodes (the lowest
node median against the median of node medians, as a ratio) and the run-to-run spread within a
node (its min over its median, the worst node). The gap a healthy node may show is the larger of
the two; the catalogue's fail gap for the type should sit well outside it. The last line, for
scripts: `fleet spread: metrics M, worst healthy gap G % (METRIC), runs R`.

Container nodes have a fixed share of the machine (providers/local/share.py) and every sample keeps
it: only samples of one share are compared (``--share LABEL``; default the newest sample's), and the
header says how many of other shares were left out.

Machines are shared and noisy: read the ratios, measured side by side in one run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterforge.certify.fleet.baseline import read_baseline  # noqa: E402
from clusterforge.journal import stack_dir  # noqa: E402

INVOKE = str(Path(sys.executable).parent / "invoke")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stack", default="local")
    ap.add_argument("--type", default="local", help="instance type (the baseline file's name)")
    ap.add_argument("--certify", type=int, default=0, metavar="K", help="certify the stack K times first")
    ap.add_argument("--baseline", type=Path, help="read this baseline file instead of the stack's")
    ap.add_argument(
        "--share", help='only samples of this share, e.g. "0.375 CPU, 2048 MiB" (default: the newest)'
    )
    args = ap.parse_args(argv)
    for i in range(args.certify):
        rc = subprocess.run([INVOKE, "certify", "--stack", args.stack], cwd=ROOT, check=False).returncode
        print(f"certification {i + 1}/{args.certify}: exit {rc}", flush=True)
    path = args.baseline or stack_dir(args.stack) / "baselines" / f"{args.type}.json"
    baseline = read_baseline(path)
    every = [s for h in baseline.metrics.values() for s in h.samples]
    share = args.share if args.share is not None else max(every, key=lambda s: s.time).share if every else ""
    for history in baseline.metrics.values():
        history.samples = [s for s in history.samples if s.share == share]
    runs = {s.run for h in baseline.metrics.values() for s in h.samples}
    left_out = len(every) - sum(len(h.samples) for h in baseline.metrics.values())
    print(f"baseline {path}: {len(baseline.metrics)} metric(s), {len(runs)} run(s)")
    print(f"share: {share or 'none recorded'}; {left_out} sample(s) of other shares left out")
    print(f"{'metric':<34} {'node':<20} {'n':>3} {'min':>9} {'median':>9} {'max':>9} {'min/med':>7}")
    worst = (0.0, "")
    for metric, history in sorted(baseline.metrics.items()):
        if not history.samples:
            continue
        by_node: dict[str, list[float]] = defaultdict(list)
        for s in history.samples:
            by_node[s.node].append(s.value)
        medians = {}
        within = 1.0
        for node, values in sorted(by_node.items()):
            med = statistics.median(values)
            medians[node] = med
            low = (min(values) / med) if history.higher_is_better else (med / max(values))
            within = min(within, low)
            print(
                f"{metric:<34} {node:<20} {len(values):>3} {min(values):>9.4g} {med:>9.4g} {max(values):>9.4g} {low:>7.3f}"
            )
        centre = statistics.median(medians.values())
        worst_node = min(medians.values()) if history.higher_is_better else max(medians.values())
        between = (worst_node / centre) if history.higher_is_better else (centre / worst_node)
        gap = (1 - min(between, within)) * 100
        print(f"{metric:<34} {'between nodes':<20} {len(medians):>3} worst node / fleet median {between:.3f}; "
              f"worst run within a node {within:.3f}; healthy gap {gap:.1f} %")  # fmt: skip
        if gap > worst[0]:
            worst = (gap, metric)
    print(
        f"fleet spread: metrics {len(baseline.metrics)}, worst healthy gap {worst[0]:.1f} % ({worst[1]}), runs {len(runs)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
