"""Where a converge's time goes: host-seconds per role and per task, from ansible-runner's events.

    .venv/bin/python benchmarks/converge_profile.py RUN [RUN2] [--top 15] [--match hold]

RUN is a playbook run's folder (``<state>/<stack>/runs/<up>/<time>-site``, the one holding
``artifacts/run/job_events``) or any folder above it: the first ``-site`` run under it is read.
Per task result (ok, changed, failed, skipped, unreachable) the event's ``duration`` is summed,
so a figure is host-seconds: 4 hosts each spending 2 s on a task count 8 s. With RUN2 the two are
printed side by side with RUN2/RUN, e.g. a first `up` before and after a role change (benchmarks/
local_up.py keeps its stacks' state folders, so their runs can be read afterwards).
The last line, for scripts: `converge profile: host-s T[, vs T2 (ratio R)][, matching M: m[ vs m2]]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# A looped task's own result event carries the whole loop's duration; its items are not summed.
from clusterforge.ansible.events import RESULT_EVENTS  # noqa: E402


def events_dir(path: Path) -> Path:
    """The job_events folder of the run at or under `path` (the first -site run, by name)."""
    if (path / "artifacts" / "run" / "job_events").is_dir():
        return path / "artifacts" / "run" / "job_events"
    runs = sorted(p for p in path.rglob("*-site") if (p / "artifacts" / "run" / "job_events").is_dir())
    if not runs:
        raise SystemExit(f"{path}: no playbook run with artifacts/run/job_events under it")
    return runs[0] / "artifacts" / "run" / "job_events"


def profile(path: Path) -> tuple[dict[str, float], dict[str, float], set[str]]:
    """(host-seconds per role, per 'role: task', hosts seen)."""
    roles: dict[str, float] = defaultdict(float)
    tasks: dict[str, float] = defaultdict(float)
    hosts: set[str] = set()
    for f in events_dir(path).glob("*.json"):
        event = json.loads(f.read_text())
        if event.get("event") not in RESULT_EVENTS:
            continue
        data = event.get("event_data", {})
        seconds = float(data.get("duration") or 0.0)
        role = data.get("role") or "(play)"
        roles[role] += seconds
        tasks[f"{role}: {data.get('task', '?')}"] += seconds
        hosts.add(data.get("host", "?"))
    return roles, tasks, hosts


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="one run, or two to compare")
    ap.add_argument("--top", type=int, default=15, help="tasks to list, largest first")
    ap.add_argument("--match", default="", help="also total the tasks whose name contains this (e.g. hold)")
    args = ap.parse_args(argv)
    if len(args.runs) > 2:
        ap.error("give one run, or two to compare")
    profiles = [profile(p) for p in args.runs]
    for path, (_, _, hosts) in zip(args.runs, profiles, strict=True):
        print(f"{path}: {len(hosts)} host(s): {', '.join(sorted(hosts))}")

    def table(title: str, index: Literal[0, 1], limit: int | None) -> None:
        keys = sorted({k for p in profiles for k in p[index]}, key=lambda k: -profiles[0][index].get(k, 0.0))
        print(f"\n{title:<60} {'host-s':>8}" + (f" {'run 2':>8} {'2/1':>6}" if len(profiles) == 2 else ""))
        for key in keys[:limit]:
            a = profiles[0][index].get(key, 0.0)
            row = f"{key[:60]:<60} {a:>8.1f}"
            if len(profiles) == 2:
                b = profiles[1][index].get(key, 0.0)
                row += f" {b:>8.1f} {b / a if a else float('nan'):>6.2f}"
            print(row)

    table("role", 0, None)
    table("task", 1, args.top)
    totals = [sum(p[0].values()) for p in profiles]
    line = f"converge profile: host-s {totals[0]:.0f}"
    if len(totals) == 2:
        line += f", vs {totals[1]:.0f} (ratio {totals[1] / totals[0]:.2f})"
    if args.match:
        matched = [sum(v for k, v in p[1].items() if args.match.lower() in k.lower()) for p in profiles]
        line += f", matching {args.match!r}: " + " vs ".join(f"{m:.1f}" for m in matched)
    print(f"\n{line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
