"""What the health policy's decisions cost at cluster scale, on a simulated journal.

    .venv/bin/python benchmarks/health_policy.py [--nodes 4096] [--strikes-per-node 2] [--runs 15]

Simulates NODES GPU nodes (8 GPUs each) with their journal records (a few failed, a few being
certified) and STRIKES_PER_NODE strikes each over the last two weeks, then times, per run:
reading the inputs from the journal records (clusterforge.health.state), the lemon verdicts,
every node's remediation decision and the active-check scheduler's choice
(clusterforge.health.plan). Everything is linear in nodes and strikes (the scheduler adds log k).
The last line, for scripts: ``health policy: nodes N, median M ms per run (U us per node)``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterforge.health.plan import health_plan  # noqa: E402
from clusterforge.health.state import HEALTH_STRIKES, read_inputs  # noqa: E402
from clusterforge.journal import NodeRecord  # noqa: E402
from clusterforge.spec.models import ClusterSpec  # noqa: E402

NOW = datetime(2026, 12, 2, tzinfo=UTC).timestamp()


def iso(seconds_ago: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).replace(microsecond=0).isoformat()


def simulated(nodes: int, per_node: int, seed: int = 7) -> tuple[ClusterSpec, dict[str, NodeRecord], dict]:
    rng = random.Random(seed)
    spec = ClusterSpec.model_validate(
        {
            "stack": "sim",
            "provider": {"kind": "aws", "region": "us-east-1", "availability_zone": "us-east-1a"},
            "node_pools": [
                {"name": "head", "role": "head", "instance_type": "m7i.4xlarge", "count": 1},
                {
                    "name": "gpu",
                    "role": "gpu",
                    "instance_type": "p5.48xlarge",
                    "count": nodes,
                    "certification": "p",
                },
            ],
            "software": {
                "os_image": "ubuntu-22.04",
                "driver": {"branch": "580", "version": "580.159.03"},
                "cuda": "13.0.2",
                "slurm": "25.11.1",
            },  # fmt: skip
            "orchestration": {"partitions": [{"name": "gpu", "pools": ["gpu"]}]},
            "certification": {"profiles": {"p": {"suite": "standard"}}},
            "health": {"active": {"profile": "p", "every": "12h", "max_nodes": "10%"}},
        }
    )
    records: dict[str, NodeRecord] = {}
    strikes = []
    for n in range(1, nodes + 1):
        name = f"gpu-{n:03d}"
        gpus = [f"GPU-{n:08x}-{g:04x}-0000-0000-000000000000" for g in range(8)]
        roll = rng.random()
        verdict = "fail" if roll < 0.01 else "pass"
        records[name] = NodeRecord(
            provider_id=f"i-0{n:016x}",
            done=["provisioned", "configured", "certified"]
            if verdict == "pass"
            else ["provisioned", "configured"],
            verdict=verdict,
            reason="clusterforge: xid: Xid 79" if verdict == "fail" else "",
            certified_at=iso(rng.uniform(0, 2 * 86400)),
            profile="p",
            certifying="run-1" if 0.01 <= roll < 0.02 else "",
            hardware={"provider_id": f"i-0{n:016x}", "gpus": gpus},
        )
        for _ in range(per_node):
            strikes.append({"identity": rng.choice(gpus), "node": name, "at": iso(rng.uniform(0, 14 * 86400)),
                            "reason": "clusterforge: ecc: +1"})  # fmt: skip
    return spec, records, {HEALTH_STRIKES: strikes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--strikes-per-node", type=int, default=2)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    spec, records, sections = simulated(args.nodes, args.strikes_per_node)
    seconds = []
    result = None
    for _ in range(args.runs):
        started = time.perf_counter()
        result = health_plan(spec.health, read_inputs(spec, records, sections), NOW)
        seconds.append(time.perf_counter() - started)
    assert result is not None
    counts: dict[str, int] = {}
    for d in result.decisions:
        counts[d.action] = counts.get(d.action, 0) + 1
    print(f"decisions: {counts}; active check next: {len(result.active)} node(s)")
    median = statistics.median(seconds)
    print(
        f"health policy: nodes {args.nodes}, median {median * 1000:.1f} ms per run "
        f"({median / args.nodes * 1e6:.1f} us per node)"
    )


if __name__ == "__main__":
    main()
