"""The local provider's own figures: node start time for 1, 2 and 4 nodes, and the time to
install slurm-wlm in a node with and without the machine-wide apt cache.

    .venv/bin/python benchmarks/local_provider.py [--sizes 1,2,4] [--rounds 2] [--image]

--image also times a node image build (a throwaway image with one extra package, so the real
one is not disturbed). Each measurement uses fresh stacks that are destroyed afterwards.
Machines are shared and noisy: read the ratios measured side by side, not lone seconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from ipaddress import IPv4Network
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterforge.providers.local import LocalProvider
from clusterforge.providers.local import image as image_mod
from clusterforge.providers.local.engine import detect_engine
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.spec.models import ClusterSpec


def make_spec(stack: str, count: int, cidr: str) -> ClusterSpec:
    base, _ = load_spec(stack_path("local"))
    pools = [p.model_copy(update={"count": count}) for p in base.node_pools if p.role == "gpu"]
    provider = base.provider.model_copy(update={"network_cidr": IPv4Network(cidr)})
    return base.model_copy(update={"stack": stack, "node_pools": pools, "provider": provider})


def time_start(provider: LocalProvider, sizes: list[int], rounds: int) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(rounds):
        for i, n in enumerate(sizes):
            spec = make_spec(f"bench-start-{n}", n, f"10.89.{240 + i}.0/24")
            provider.image(spec)  # not timed: built once per machine
            started = time.monotonic()
            try:
                provider.create(spec)
                out[n].append(time.monotonic() - started)
            finally:
                provider.destroy(spec)
    return out


def apt_install(provider: LocalProvider, spec: ClusterSpec, node: str) -> float:
    apt = ("env", "DEBIAN_FRONTEND=noninteractive", "apt-get")
    provider.exec(spec, node, *apt, "update", "-qq", timeout=600)
    started = time.monotonic()
    provider.exec(spec, node, *apt, "install", "-y", "-qq", "slurm-wlm", timeout=900)
    return time.monotonic() - started


def time_apt(engine, rounds: int) -> tuple[list[float], list[float]]:
    cold: list[float] = []
    warm: list[float] = []
    for r in range(rounds):
        plain = LocalProvider(engine, apt_cache=False)
        cached = LocalProvider(engine, apt_cache=True)
        a = make_spec("bench-apt-plain", 1, "10.89.246.0/24")
        b = make_spec("bench-apt-cache", 2, "10.89.247.0/24")
        try:
            plain.create(a)
            cached.create(b)
            apt_install(cached, b, "node-001")  # fills the machine cache (if it was not already)
            # side by side, alternating which goes first
            pairs = [("plain", plain, a), ("cache", cached, b)]
            for label, provider, spec in pairs if r % 2 == 0 else reversed(pairs):
                node = "node-001" if label == "plain" else "node-002"
                (cold if label == "plain" else warm).append(apt_install(provider, spec, node))
        finally:
            plain.destroy(a)
            cached.destroy(b)
    return cold, warm


def time_image(engine) -> float:
    packages = (*image_mod.PACKAGES, "hello")
    started = time.monotonic()
    tag, built = image_mod.ensure_image(engine, "bookworm", packages)
    elapsed = time.monotonic() - started
    if built:
        engine.run("rmi", tag)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--image", action="store_true", help="also time an image build")
    parser.add_argument("--skip-apt", action="store_true")
    args = parser.parse_args()
    engine = detect_engine()
    provider = LocalProvider(engine)
    if args.image:
        print(f"image build: {time_image(engine):.1f} s (debootstrap minbase + import)")
    sizes = [int(s) for s in args.sizes.split(",")]
    starts = time_start(provider, sizes, args.rounds)
    base = statistics.median(starts[sizes[0]])
    for n in sizes:
        med = statistics.median(starts[n])
        print(
            f"create {n} node(s) (systemd running): median {med:.2f} s, ratio to {sizes[0]}: {med / base:.2f}"
        )
    if not args.skip_apt:
        cold, warm = time_apt(engine, args.rounds)
        c, w = statistics.median(cold), statistics.median(warm)
        print(
            f"apt-get install slurm-wlm: without cache median {c:.1f} s, with warm machine cache {w:.1f} s, ratio {w / c:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
