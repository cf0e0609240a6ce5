"""The journal's cost per fresh `up`, through its public API: 7 changes per node (observe,
provisioned, applied, drift, configured, certifying, certified + versions), then a reload.

Records are the size the pipeline writes (applied fingerprints and a drift baseline of about
6 KB each). Prints, per node count, the seconds for the changes, the reload, the bytes the
journal's files hold and the fitted growth exponent; last line
`journal: 4096 nodes, changes S s, load L s, exponent K` for scripts.

    .venv/bin/python benchmarks/journal_events.py [--nodes 256,1024,4096]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clusterforge.journal import Journal


def node_blob(node: str, kind: str, entries: int = 60) -> dict[str, object]:
    return {f"{kind}/{i:03d}": f"{node}-{kind}-{i}-" + "0123456789abcdef" * 5 for i in range(entries)}


def one_up(root: Path, count: int) -> tuple[float, float, int]:
    journal = Journal("bench", root)
    names = [f"gpu-{i:04d}" for i in range(1, count + 1)]
    start = time.perf_counter()
    for name in names:
        journal.observe(name, f"i-{name}")
        journal.mark_done(name, "provisioned")
        journal.record_applied(name, {"inputs": node_blob(name, "applied")})
        journal.record_drift(name, {"items": node_blob(name, "drift")})
        journal.mark_done(name, "configured")
        journal.annotate(name, certifying="run-1")
        journal.mark_done(name, "certified", verdict="pass", certifying="", run_id="run-1")
    changes = time.perf_counter() - start
    start = time.perf_counter()
    again = Journal("bench", root)
    load = time.perf_counter() - start
    assert again.record(names[-1]).verdict == "pass" and len(again.nodes) == count
    size = sum(p.stat().st_size for p in (root / "bench").iterdir() if p.is_file())
    return changes, load, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", default="256,1024,4096")
    args = parser.parse_args()
    counts = [int(x) for x in args.nodes.split(",")]
    rows = []
    for count in counts:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append((count, *one_up(Path(tmp), count)))
    print(f"{'nodes':>6} {'changes s':>10} {'per node ms':>12} {'load s':>8} {'files MB':>9}")
    for count, changes, load, size in rows:
        print(f"{count:>6} {changes:>10.2f} {changes / count * 1000:>12.2f} {load:>8.2f} {size / 1e6:>9.1f}")
    exponent = 1.0
    if len(rows) > 1:
        (n0, c0, *_), (n1, c1, *_) = rows[0], rows[-1]
        exponent = math.log(c1 / c0) / math.log(n1 / n0)
    last = rows[-1]
    print(f"journal: {last[0]} nodes, changes {last[1]:.1f} s, load {last[2]:.2f} s, exponent {exponent:.2f}")


if __name__ == "__main__":
    main()
