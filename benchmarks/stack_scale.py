"""How the AWS Pulumi program scales: time and peak memory to evaluate it under Pulumi's mocks
for the `prod` spec resized to N GPU nodes (default 100 and 1,000).

Each size runs in its own process so peak RSS is that size's alone. The figures are the
program's own cost (Python, the SDK, resource registration through the mock monitor), not a
cloud deployment. Shared machines are noisy: compare sizes side by side from one run.

    .venv/bin/python benchmarks/stack_scale.py [N ...]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one(nodes: int) -> dict[str, float]:
    sys.path.insert(0, str(REPO / "stacks"))
    import pulumi

    from clusterforge.spec.loader import load_spec, stack_path

    class Mocks(pulumi.runtime.Mocks):
        count = 0

        def new_resource(self, args: pulumi.runtime.MockResourceArgs):
            Mocks.count += 1
            state = dict(args.inputs)
            if args.typ == "aws:ec2/instance:Instance":
                state.update(
                    privateIp=f"10.0.{Mocks.count // 250}.{Mocks.count % 250 + 4}", availabilityZone="az"
                )
            elif args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
                state.update(latestVersion=1)
            return f"{args.name}-{Mocks.count}", state

        def call(self, args: pulumi.runtime.MockCallArgs):
            return {"value": "ami-0123456789abcdef0"}, []

    pulumi.runtime.set_mocks(Mocks(), project="clusterforge", stack="bench", preview=False)
    from components.cluster import build_cluster, export_cluster

    spec, _ = load_spec(stack_path("prod"))
    pools = [
        p.model_copy(update={"count": nodes, "capacity_reservation_size": None}) if p.role == "gpu" else p
        for p in spec.node_pools
    ]
    spec = spec.model_copy(update={"node_pools": pools})
    started = time.perf_counter()
    cpu_started = time.process_time()

    @pulumi.runtime.test
    def program():
        return pulumi.Output.from_input(export_cluster(spec, build_cluster(spec))["nodes"])

    program()
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {
        "nodes": nodes,
        "resources": Mocks.count,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "peak_rss_mib": round(peak_mib, 1),
    }


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        print(json.dumps(one(int(argv[1]))))
        return 0
    sizes = [int(a) for a in argv] or [100, 1000]
    rows = []
    for n in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--one", str(n)], capture_output=True, text=True, check=True, cwd=REPO
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(
        f"{'gpu nodes':>9} {'resources':>9} {'wall s':>8} {'CPU s':>7} {'CPU s/node':>10} {'peak RSS MiB':>12}"
    )
    for r in rows:
        per = r["cpu_seconds"] / r["nodes"]
        print(
            f"{r['nodes']:>9} {r['resources']:>9} {r['seconds']:>8.2f} {r['cpu_seconds']:>7.2f} {per:>10.4f} "
            f"{r['peak_rss_mib']:>12.1f}"
        )
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(
            f"{b['nodes'] / a['nodes']:.0f}x the nodes: {b['cpu_seconds'] / a['cpu_seconds']:.1f}x the CPU time, "
            f"{b['peak_rss_mib'] / a['peak_rss_mib']:.1f}x the peak memory"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
