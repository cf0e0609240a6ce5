"""How the pure rollout planner scales: batches and planning time for simulated fleets.

For N nodes in 3 pools (60/35/5 %), 90 % in service, every node needing re-certification, it
times ``plan_rollout`` (median of 5) at a few ``max_unavailable`` settings and prints the
number of batches, the largest batch, and the time per 1,000 nodes. Shared machines are noisy:
compare the rows of one run with each other, not with another machine's.

    .venv/bin/python benchmarks/rollout_batching.py [N ...]
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from clusterforge.plan.impact import LiveNode, LiveState, NodeImpact
from clusterforge.plan.rollout import plan_rollout
from clusterforge.spec.models import Rollout

SHARES = {"a": 0.60, "b": 0.35, "c": 0.05}


def fleet(n: int, seed: int = 1) -> tuple[list[NodeImpact], LiveState]:
    rng = random.Random(seed)
    impacts, nodes = [], {}
    for pool, share in SHARES.items():
        for k in range(1, max(1, int(n * share)) + 1):
            name = f"{pool}-{k:05d}"
            serving = rng.random() < 0.9
            impacts.append(NodeImpact(name, pool, "gpu", configure=("nccl",), recertify=True, drain=serving))
            nodes[name] = LiveNode(name, serving=serving, pool=pool)
    return impacts, LiveState(nodes=nodes)


def main(sizes: list[int]) -> None:
    print(
        f"{'nodes':>7} {'max_unavailable':>15} {'batches':>8} {'largest':>8} {'median ms':>10} {'ms/1k nodes':>12}"
    )
    for n in sizes:
        impacts, live = fleet(n)
        for setting in (1, "5%", "25%"):
            policy = Rollout(max_unavailable=setting)
            times = []
            for _ in range(5):
                start = time.perf_counter()
                plan = plan_rollout(impacts, live, policy, pool_order=list(SHARES))
                times.append(time.perf_counter() - start)
            ms = statistics.median(times) * 1000
            largest = max(len(b.nodes) for b in plan.batches)
            print(
                f"{len(impacts):>7} {setting!s:>15} {len(plan.batches):>8} {largest:>8} {ms:>10.1f} {ms / len(impacts) * 1000:>12.2f}"
            )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 4000, 16000])
