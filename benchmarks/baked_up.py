"""`invoke up` from a baked image against `invoke up` from the base image, on the local stack.

    flock /tmp/clusterforge-containers.lock .venv/bin/python benchmarks/baked_up.py [--nodes 1] [--repeat 1]

First `invoke image.bake` for a stack of stacks/local.yaml's shape (timed: the one-off cost), then
per repetition two fresh stacks side by side (head + N compute nodes, own names and networks): one
whose compute pool boots the base image, one whose pool boots the baked image (the bake's record
copied to it: the software digest does not depend on the stack's name). Each is brought up with
`invoke up --spec` (timed: provision, configure, certify, admit) and destroyed. Reported per run: the
wall time of `up`, and the Ansible changes at boot per compute node (site.yml's changed task results
on it; the head converges the same way in both). The node image is built before timing starts.
The last line, for scripts: `baked up: base B s, baked K s (K/B R), changes at boot base C, baked D`
(medians; C and D per compute node).
"""

from __future__ import annotations

import argparse
import json
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


def spec_file(folder: Path, stack: str, nodes: int, cidr: str, image: str) -> Path:
    spec = yaml.safe_load((ROOT / "stacks" / "local.yaml").read_text())
    spec["stack"] = stack
    spec["provider"]["network_cidr"] = cidr
    for pool in spec["node_pools"]:
        if pool["role"] == "gpu":
            pool["count"] = nodes
            pool["image"] = image
    path = folder / f"{stack}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def timed(args: list[str], env: dict[str, str], log: Path) -> tuple[float, int]:
    start = time.perf_counter()
    with log.open("a") as out:
        rc = subprocess.run(
            [INVOKE, *args], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False
        )
    return time.perf_counter() - start, rc.returncode


def boot_changes(state: Path, stack: str) -> dict[str, int]:
    """Changed task results per host in the stack's site.yml runs (the converge at boot)."""
    changed: dict[str, int] = {}
    for events in sorted((state / stack / "runs").glob("*/*-site/artifacts/run/job_events")):
        for path in events.iterdir():
            event = json.loads(path.read_text())
            data = event.get("event_data") or {}
            if event.get("event") == "runner_on_ok" and (data.get("res") or {}).get("changed"):
                changed[data["host"]] = changed.get(data["host"], 0) + 1
    return changed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1, help="compute nodes per stack")
    ap.add_argument("--repeat", type=int, default=1, help="pairs of stacks; medians are reported")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from clusterforge.images.record import load_records, save_record
    from clusterforge.providers.local import LocalProvider
    from clusterforge.spec.loader import load_spec, stack_path
    from tests.fixtures.nodes import _free_cidr

    spec, _ = load_spec(stack_path("local"))
    provider = LocalProvider()
    print("building/checking the node image (not timed) ...", flush=True)
    provider.image(spec)
    work = Path(tempfile.mkdtemp(prefix="cf-baked-up-"))
    state = work / "state"
    env = dict(os.environ, CLUSTERFORGE_STATE_DIR=str(state))
    os.environ["CLUSTERFORGE_STATE_DIR"] = str(state)
    tag = f"bk{os.getpid() % 10000}"
    bake_spec = spec_file(work, f"{tag}bake", args.nodes, str(_free_cidr(provider.engine(spec))), "baked")
    bake_s, rc = timed(["image.bake", "--spec", str(bake_spec)], env, work / "bake.log")
    print(f"image.bake: {bake_s:.1f} s (rc {rc}); log {work / 'bake.log'}", flush=True)
    timed(["down", "--spec", str(bake_spec), "--yes"], env, work / "bake.log")  # the builder's network
    if rc != 0:
        return 1
    records = load_records(f"{tag}bake")
    results: dict[str, list[tuple[float, int, float]]] = {"base": [], "baked": []}
    for rep in range(args.repeat):
        for image in ("base", "baked"):
            # one letter each: "base"[:2] and "baked"[:2] were both "ba", so the two runs shared a stack
            # name and state, and the baked run's changes counted the base run's too
            stack = f"{tag}{'b' if image == 'base' else 'k'}{rep}"
            path = spec_file(work, stack, args.nodes, str(_free_cidr(provider.engine(spec))), image)
            if image == "baked":
                for record in records.values():
                    save_record(stack, record)
            log = work / f"{stack}.log"
            wall, rc = timed(["up", "--spec", str(path)], env, log)
            changes = boot_changes(state, stack)
            compute = [v for h, v in changes.items() if not h.startswith("head")]
            per_node = statistics.median(compute) if compute else 0.0
            results[image].append((wall, rc, per_node))
            print(
                f"{image:>5} run {rep + 1}: up {wall:.1f} s (rc {rc}), changes at boot {changes}; log {log}",
                flush=True,
            )
            timed(["down", "--spec", str(path), "--yes"], env, log)
    med = {k: statistics.median(r[0] for r in v) for k, v in results.items()}
    chg = {k: statistics.median(r[2] for r in v) for k, v in results.items()}
    span = {k: (min(r[0] for r in v), max(r[0] for r in v)) for k, v in results.items()}
    print()
    for k in ("base", "baked"):
        print(
            f"{k:>5}: up median {med[k]:.1f} s (min {span[k][0]:.1f}, max {span[k][1]:.1f}), "
            f"changes at boot per compute node {chg[k]:.0f}"
        )
    engine = provider.engine(spec)
    for record in records.values():
        engine.run("rmi", record.image, check=False)
    print(
        f"baked up: base {med['base']:.1f} s, baked {med['baked']:.1f} s ({med['baked'] / med['base']:.2f}), "
        f"changes at boot base {chg['base']:.0f}, baked {chg['baked']:.0f}"
    )
    return 0 if all(r[1] == 0 for v in results.values() for r in v) else 1


if __name__ == "__main__":
    sys.exit(main())
