"""The CPU path's network figure against raw TCP between the same two container nodes.

    .venv/bin/python benchmarks/gloo_vs_tcp.py [--repeats 3] [--sizes 16,64,256] [--iterations 5,20]

Starts two container nodes (a throw-away stack, through the project's engine wrapper), then, in
alternation so that both see the same machine: raw TCP (one stream, a stdlib sender/receiver,
256 MiB), raw TCP both ways at once (one stream each way, the per-direction rate), and gloo
all_reduce (the validators' own workload, two ranks, one per node) at each message size and
iteration count. Prints medians per setting and gloo / TCP as ratios; the last line, for scripts:
`gloo vs tcp: best ratio R at S MiB x I iterations, spread P %, vs both ways B`.

Why both references: a two-rank ring all_reduce of S bytes sends S/2 + S/2 each way at once
(reduce-scatter, then all-gather), and its busbw is S / time. When the streams are CPU-bound
(two containers sharing two cores), both directions share the cores one stream had to itself,
so 0.5 of the one-stream figure is the ceiling, not a floor; the both-ways figure is the rate the
ring can reach.

Machines are shared and noisy: read the ratios measured side by side, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clusterforge.providers.local import LocalProvider  # noqa: E402
from clusterforge.providers.local.engine import detect_engine  # noqa: E402
from tests.fixtures.nodes import _free_cidr, _spec  # noqa: E402

TCP = r"""
import socket, sys, time
mode, host, port, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
chunk = bytearray(4 << 20)
if mode == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(1); c, _ = s.accept(); view = memoryview(chunk); got = 0
    start = time.perf_counter()
    while got < total:
        n = c.recv_into(view)
        if not n: break
        got += n
    print(got / (time.perf_counter() - start) / 1e9)
else:
    for _ in range(100):
        try: s = socket.create_connection((host, port)); break
        except OSError: time.sleep(0.05)
    sent = 0
    while sent < total:
        s.sendall(chunk); sent += len(chunk)
    s.close()
"""
TORCH = "/opt/clusterforge/torch"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", default="16,64,256", help="message sizes in MiB")
    ap.add_argument("--iterations", default="5,20")
    args = ap.parse_args(argv)
    engine = detect_engine("auto")
    provider = LocalProvider(engine)
    spec = _spec("benchgloo", 2, False, _free_cidr(engine))
    nodes = provider.create(spec)
    try:
        a, b = sorted(nodes, key=lambda n: n.name)
        for n in (a, b):
            engine.run(
                "cp",
                str(ROOT / "validators" / "workloads" / "gloo_allreduce.py"),
                f"{n.connection['ansible_host']}:/var/tmp/g.py",
            )
            engine.run(
                "exec",
                "-i",
                n.connection["ansible_host"],
                "sh",
                "-c",
                "cat > /var/tmp/tcp.py",
                input=TCP.encode(),
            )
        ca, cb = a.connection["ansible_host"], b.connection["ansible_host"]

        def tcp() -> float:
            total = 256 << 20
            recv = engine.popen("exec", ca, "python3", "/var/tmp/tcp.py", "recv", "0", "29600", str(total))
            engine.run("exec", cb, "python3", "/var/tmp/tcp.py", "send", a.address, "29600", str(total))
            out, _ = recv.communicate(timeout=120)
            return float(out.strip())

        def tcp_both_ways() -> float:
            """Per-direction rate with a stream each way at once (the slower of the two)."""
            total = 256 << 20
            rates = []
            recv_a = engine.popen("exec", ca, "python3", "/var/tmp/tcp.py", "recv", "0", "29602", str(total))
            recv_b = engine.popen("exec", cb, "python3", "/var/tmp/tcp.py", "recv", "0", "29603", str(total))
            send_b = engine.popen(
                "exec", cb, "python3", "/var/tmp/tcp.py", "send", a.address, "29602", str(total)
            )
            send_a = engine.popen(
                "exec", ca, "python3", "/var/tmp/tcp.py", "send", b.address, "29603", str(total)
            )
            for proc in (send_a, send_b):
                proc.communicate(timeout=120)
            for proc in (recv_a, recv_b):
                out, _ = proc.communicate(timeout=120)
                rates.append(float(out.strip()))
            return min(rates)

        def gloo(mib: int, iters: int) -> float:
            cmd = ["env", f"PYTHONPATH={TORCH}", "python3", "/var/tmp/g.py", "--bytes", str(mib << 20),
                   "--iterations", str(iters), "--timeout", "120", "--world-size", "2",
                   "--master", f"{a.address}:29601"]  # fmt: skip
            r0 = engine.popen("exec", ca, *cmd, "--rank", "0")
            engine.run("exec", cb, *cmd, "--rank", "1", timeout=300)
            out, _ = r0.communicate(timeout=300)
            return float(json.loads(out.strip().splitlines()[-1])["busbw_gbps"])

        sizes = [int(s) for s in args.sizes.split(",")]
        iters = [int(i) for i in args.iterations.split(",")]
        tcp_runs: list[float] = []
        both_runs: list[float] = []
        runs: dict[tuple[int, int], list[float]] = {(s, i): [] for s in sizes for i in iters}
        for _ in range(args.repeats):
            tcp_runs.append(tcp())
            both_runs.append(tcp_both_ways())
            for key in runs:
                runs[key].append(gloo(*key))
        line = statistics.median(tcp_runs)
        print(
            f"raw TCP, one stream, 256 MiB: median {line:.3f} GB/s (min {min(tcp_runs):.3f}, max {max(tcp_runs):.3f})"
        )
        both = statistics.median(both_runs)
        print(
            f"raw TCP, both ways at once, 256 MiB each: median {both:.3f} GB/s per direction "
            f"(min {min(both_runs):.3f}, max {max(both_runs):.3f}); {both / line if line else 0:.2f} x one stream"
        )
        print(
            f"{'MiB':>5} {'iters':>5} {'gloo busbw median':>18} {'min':>7} {'max':>7} {'spread %':>8} {'/ tcp':>6}"
            f" {'/ both':>7}"
        )
        best = None
        for (mib, it), vals in runs.items():
            med = statistics.median(vals)
            spread = (max(vals) - min(vals)) / med * 100 if med else 0.0
            ratio = med / line if line else 0.0
            to_both = med / both if both else 0.0
            print(
                f"{mib:>5} {it:>5} {med:>18.3f} {min(vals):>7.3f} {max(vals):>7.3f} {spread:>8.1f} {ratio:>6.2f}"
                f" {to_both:>7.2f}"
            )
            if best is None or ratio > best[0]:
                best = (ratio, mib, it, spread, to_both)
        assert best is not None
        print(
            f"gloo vs tcp: best ratio {best[0]:.2f} at {best[1]} MiB x {best[2]} iterations, spread {best[3]:.0f} %,"
            f" vs both ways {best[4]:.2f}"
        )
    finally:
        provider.destroy(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
