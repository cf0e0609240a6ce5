"""What one round of the health loop costs on the head node at cluster scale (simulated Slurm).

    .venv/bin/python benchmarks/health_loop.py [--nodes 4096] [--rounds 5] [--fail-every 200]

A fake head node (tests/health/fake_head.py: Slurm's rules, no daemons) with NODES compute nodes and
the policy ``max_nodes: 10%``. Before each timed round every running check finishes (its report.json
and rc written to the shared folder; one in FAIL_EVERY fails, a few nodes are busy with users' jobs),
then one round runs: ping, sinfo, squeue, read and judge every finished report (node verdicts and the
fleet judge), strikes, drains, re-certifications, returns, the scheduler's choice, the submissions,
and the journal on disk. The first round (every node observed and submitted once) is not counted.
Peak memory is tracemalloc's for the timed rounds. Last line, for scripts:
``health loop: nodes N, median M ms per round, peak P MiB, H head commands per round``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterforge.health.loop.config import parse_config  # noqa: E402
from clusterforge.health.loop.round import run_round  # noqa: E402
from clusterforge.journal import Journal  # noqa: E402
from tests.health.fake_head import FakeHead  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--fail-every", type=int, default=200)
    args = ap.parse_args()
    names = [f"gpu-{i:04d}" for i in range(1, args.nodes + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        cfg = parse_config(
            {
                "stack": "bench",
                "health": {
                    "active": {"profile": "quick", "every": "1s", "max_nodes": "10%"},
                    "remediation": {"recertify_retry": "1s"},
                },
                "state_dir": tmp,
                "active_suite": "quick",
                "provider": "aws",
                "nodes": {
                    n: {"pool": "gpu", "instance_type": "p5.48xlarge", "identities": [f"i-{n}"]}
                    for n in names
                },
            }
        )
        head = FakeHead(names)
        for n in names[:: max(1, args.nodes // 50)]:
            head.submit_user_job(n)  # 2 % busy with users' jobs: never checked
        journal = Journal(cfg.stack, root=cfg.state_dir)
        run_round(cfg, head, journal)
        seconds, calls, peaks = [], [], []
        count = 0
        for _ in range(args.rounds):
            for job in [j for j in head.health_jobs() if j.state == "RUNNING"]:
                count += 1
                head.finish(job.node, passed=count % args.fail_every != 0, reason="GPU 0 fell off the bus")
            before = len(head.calls)
            tracemalloc.start()
            start = time.perf_counter()
            result = run_round(cfg, head, journal)
            seconds.append(time.perf_counter() - start)
            peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
            tracemalloc.stop()
            calls.append(len(head.calls) - before)
            print(f"round: {seconds[-1] * 1000:.0f} ms, {calls[-1]} head commands, {result.summary()}")
    median_ms = statistics.median(seconds) * 1000
    print(
        f"health loop: nodes {args.nodes}, median {median_ms:.0f} ms per round, peak {max(peaks):.0f} MiB, "
        f"{statistics.median(calls):.0f} head commands per round"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
