"""A stack's state written to and read from a folder backend at 4,096 nodes (the folder stands in
for S3; S3 adds a request's latency per changed object, spread over 16 threads).

The working copy is what a certified 4,096-node stack leaves: the journal of a fresh `up`
(benchmarks/journal_events.py's records, ~59 MB), one baseline, and three report files per node
(~12,000 files of a few KB). Prints the seconds of the first write, of a write after one node's
report changed, of a whole read into an empty copy, and of a read-only command's read (journal and
baselines); last line `state write: 4096 nodes, first S s, one report R s, read P s, read-only Q s`.

    .venv/bin/python benchmarks/state_write.py [--nodes 4096]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from journal_events import node_blob  # beside this file: run as benchmarks/state_write.py

from clusterforge.journal import Journal
from clusterforge.state.fsdir import DirectoryBackend
from clusterforge.state.snapshot import StackState


def working_copy(root: Path, count: int) -> Path:
    journal = Journal("bench", root)
    for i in range(1, count + 1):
        name = f"gpu-{i:04d}"
        journal.observe(name, f"i-{name}")
        journal.record_applied(name, {"inputs": node_blob(name, "applied")})
        journal.record_drift(name, {"items": node_blob(name, "drift")})
        journal.mark_done(name, "certified", verdict="pass", run_id="run-1")
        folder = root / "bench" / "reports" / name
        folder.mkdir(parents=True)
        (folder / "report.json").write_text(json.dumps({"node": name, "checks": [node_blob(name, "c", 20)]}))
        (folder / "junit.xml").write_text(f"<testsuites name='{name}'/>" + "x" * 800)
        (folder / "network-report.json").write_text(json.dumps({"node": name, "partners": ["a", "b"]}))
    (root / "bench" / "baselines").mkdir()
    (root / "bench" / "baselines" / "p5.48xlarge.json").write_text("{}")
    return root / "bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=4096)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "backend").mkdir()
        store = StackState(DirectoryBackend(base / "backend"), "bench")
        work = working_copy(base / "ws", args.nodes)
        start = time.perf_counter()
        first = store.push(work, None, "bench")
        t_first = time.perf_counter() - start
        (work / "reports" / "gpu-0007" / "report.json").write_text('{"node": "gpu-0007", "again": true}')
        start = time.perf_counter()
        store.push(work, first, "bench")
        t_one = time.perf_counter() - start
        start = time.perf_counter()
        store.pull(base / "ci" / "bench")
        t_read = time.perf_counter() - start
        start = time.perf_counter()
        store.pull(base / "ro" / "bench", only=("journal.", "baselines/"), check=False)
        t_ro = time.perf_counter() - start
        size = sum(e.size for e in first.objects.values())
    print(f"{len(first.objects)} files, {size / 1e6:.0f} MB")
    print(f"state write: {args.nodes} nodes, first {t_first:.1f} s, one report {t_one:.1f} s, "
          f"read {t_read:.1f} s, read-only {t_ro:.1f} s")  # fmt: skip


if __name__ == "__main__":
    main()
