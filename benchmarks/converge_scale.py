"""Wall time of the configure step (playbooks/site.yml) for 1, 2, 4, 8 compute container nodes.

    flock /tmp/clusterforge-containers.lock .venv/bin/python benchmarks/converge_scale.py \\
        [--nodes 1,2,4,8] [--repeat 3] [--forks N] [--image base|baked] [--out results.jsonl] [--min-share 0.15]

Each size and repetition gets a fresh stack (head + N compute nodes of stacks/local.yaml, own name,
network and state folder): the provider creates the containers (not timed), then site.yml converges
every node in one Ansible run with the environment `invoke up` gives it (clusterforge/ansible/
scale.py: forks from this machine's CPUs and the spec's bound, smart gathering with the stack's
fact cache) and is timed, then a second converge (the idempotence check: it must change nothing)
is timed too; then the stack is destroyed. The node image is built before timing starts, and every
node shares the machine's apt cache volume, so only the first run of a machine downloads packages.

Prints per run: wall seconds, seconds per node (wall / (N + 1): the head converges too), forks,
changes (first and second converge); then per size the median, min and max. ``--out`` appends one
JSON line per run, so a long series can be split over several runs under the container lock.
The last line, for scripts: `converge scale: N nodes S s/node median (forks F), second converge C changes`
(N the largest size). Machines are shared and noisy: compare sizes measured side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1,2,4,8", help="compute node counts, comma-separated")
    ap.add_argument("--repeat", type=int, default=1, help="fresh stacks per size")
    ap.add_argument("--forks", type=int, default=0, help="spec ansible.forks (default: from the CPUs)")
    ap.add_argument("--image", choices=("base", "baked"), default="base", help="what the compute pool boots")
    ap.add_argument(
        "--baked-from", default="local", help="--image baked: the stack whose baked image is booted"
    )
    ap.add_argument("--out", default="", help="append one JSON line per run to this file")
    ap.add_argument("--keep", action="store_true", help="keep the stacks (default: destroy each)")
    ap.add_argument(
        "--min-share",
        type=float,
        default=0.0,
        help="the least CPU share a compute node may get (default: the catalogue's, the least a node "
        "certifies with; this benchmark certifies nothing, so 8 nodes fit a 2-core machine with 0.15)",
    )
    args = ap.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]

    sys.path.insert(0, str(ROOT))
    if args.min_share:
        lower_share_floor(args.min_share)
    from clusterforge.ansible.runner import PlaybookRun
    from clusterforge.ansible.scale import workstation_cpus
    from clusterforge.images.boot import boot_digests
    from clusterforge.inventory import render_inventory, write_inventory
    from clusterforge.journal import stack_dir
    from clusterforge.pipeline.context import stack_env
    from clusterforge.providers.local import LocalProvider
    from clusterforge.spec.loader import load_spec, stack_path
    from tests.fixtures.nodes import _free_cidr

    base_spec, _ = load_spec(stack_path("local"))
    provider = LocalProvider()
    print("building/checking the node image (not timed) ...", flush=True)
    provider.image(base_spec)
    from clusterforge.images.record import load_records, save_record

    baked = load_records(args.baked_from) if args.image == "baked" else {}
    if args.image == "baked" and not baked:
        raise SystemExit(f"--image baked: stack {args.baked_from} has no baked image (invoke image.bake)")
    work = Path(tempfile.mkdtemp(prefix="cf-converge-"))
    os.environ["CLUSTERFORGE_STATE_DIR"] = str(work / "state")  # each run's journal and facts: fresh
    rows: list[dict[str, Any]] = []  # one JSON row per converge (numbers and the forks' text)
    for rep in range(args.repeat):
        for n in sizes:
            stack = f"cv{os.getpid() % 10000}n{n}r{rep}"
            pools = [
                p.model_copy(update={"count": n, "image": args.image}) if p.role == "gpu" else p
                for p in base_spec.node_pools
            ]
            ansible = base_spec.ansible.model_copy(update={"forks": args.forks or None})
            provider_spec = base_spec.provider.model_copy(
                update={"network_cidr": _free_cidr(provider.engine(base_spec))}
            )
            spec = base_spec.model_copy(
                update={"stack": stack, "node_pools": pools, "ansible": ansible, "provider": provider_spec}
            )
            for record in baked.values():  # the digest does not depend on the stack's name
                save_record(stack, record)
            state = stack_dir(stack)
            nodes = provider.create(spec, lambda _n, _m: None)
            inventory = write_inventory(
                render_inventory(
                    spec,
                    nodes,
                    state / "munge.key",
                    image_digests=boot_digests(spec, lambda _n, line: print(line)),
                ),
                work / stack / "inventory",
            )
            env = stack_env(spec, state)
            try:
                timings = []
                for _ in range(2):
                    run = PlaybookRun(ROOT / "playbooks" / "site.yml", inventory, state / "runs", env=env)
                    start = time.perf_counter()
                    result = run.run()
                    timings.append((time.perf_counter() - start, result))
                (first_s, first), (again_s, again) = timings
                row = {
                    "nodes": n,
                    "hosts": n + 1,
                    "forks": int(env["ANSIBLE_FORKS"]),
                    "cpus": workstation_cpus(),
                    "image": args.image,
                    "rc": first.rc,
                    "wall_s": round(first_s, 1),
                    "per_node_s": round(first_s / (n + 1), 1),
                    "changed": first.changed,
                    "second_s": round(again_s, 1),
                    "second_rc": again.rc,
                    "second_changed": again.changed,
                    "second_changed_tasks": sorted(
                        {t for h in again.hosts.values() for t in h.changed_tasks}
                    ),
                    "log": str(first.log),
                }
            finally:
                if not args.keep:
                    provider.destroy(spec)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                with open(args.out, "a") as out:
                    out.write(json.dumps(row) + "\n")
    print()
    print(
        f"{'nodes':>5} {'runs':>4} {'forks':>5} {'wall s med':>10} {'min':>7} {'max':>7} {'s/node med':>10} {'2nd changes':>11}"
    )
    for n in sizes:
        mine = [r for r in rows if r["nodes"] == n]
        walls = [float(r["wall_s"]) for r in mine]
        per = [float(r["per_node_s"]) for r in mine]
        print(
            f"{n:>5} {len(mine):>4} {mine[0]['forks']:>5} {statistics.median(walls):>10.1f} {min(walls):>7.1f} "
            f"{max(walls):>7.1f} {statistics.median(per):>10.1f} {max(int(r['second_changed']) for r in mine):>11}"
        )
    top = [r for r in rows if r["nodes"] == sizes[-1]]
    print(
        f"converge scale: {sizes[-1]} nodes {statistics.median(float(r['per_node_s']) for r in top):.1f} s/node median "
        f"(forks {top[0]['forks']}), second converge {max(int(r['second_changed']) for r in top)} changes"
    )
    return 0 if all(r["rc"] == 0 and r["second_rc"] == 0 for r in rows) else 1


def lower_share_floor(min_cpus: float) -> None:
    """Every container type's share floor set to ``min_cpus`` for this process: the provider's
    share rule refuses nodes under the least a node certifies with, and this benchmark only
    configures (the quotas still add up to the cores the head and the workstation leave)."""
    from clusterforge.providers.local import share

    catalog = share.load_hardware()
    types = {
        name: it.model_copy(update={"share": it.share.model_copy(update={"min_cpus": min_cpus})})
        if it.share is not None
        else it
        for name, it in catalog.instance_types.items()
    }
    lowered = catalog.model_copy(update={"instance_types": types})
    share.load_hardware = lambda: lowered  # type: ignore[assignment]  # this process's provider only


if __name__ == "__main__":
    sys.exit(main())
