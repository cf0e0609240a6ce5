"""``python -m clusterforge.health.loop [--config FILE]``: one round, run by the head node's timer.

Exit 0 after a round (also a paused one: the controller is away, nothing is wrong with the nodes), 1 on a
configuration error, 2 when another round still runs (the lock on shared storage is held).

``--state`` runs no round: it prints what the workstation reads (``clusterforge.health.head_state``) as
one JSON object, the loop journal's ``replace_requested``, ``rma_flagged`` and ``health_strikes``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
import time
from pathlib import Path

from clusterforge.health.loop.config import CONFIG_PATH, ConfigError, LoopConfig, read_config
from clusterforge.health.loop.metrics import STATES_FILE, read_states, render, states_now, write
from clusterforge.health.loop.round import REPLACE_REQUESTED, RMA_FLAGGED, RoundResult, run_round
from clusterforge.health.state import HEALTH_STRIKES
from clusterforge.journal import Journal, write_atomic

LOCK_FILE = "health-loop.lock"


def local_runner(timeout_s: float = 120.0):
    """Commands on this (the head) node: ``(argv, stdin=None) -> (rc, stdout, stderr)``."""

    def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        try:
            done = subprocess.run(
                argv, input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except FileNotFoundError as exc:
            return 127, "", f"{argv[0]}: {exc.strerror}"
        except subprocess.TimeoutExpired:
            return 124, "", f"{argv[0]}: no answer within {timeout_s:.0f} s"
        return done.returncode, done.stdout, done.stderr

    return run


def publish(config: LoopConfig, journal: Journal, result: RoundResult, now: float) -> None:
    """The textfile for node_exporter, and the states file it keeps the times in."""
    if not config.textfile_dir:
        return
    states_path = config.stack_dir / STATES_FILE
    before = read_states(states_path)
    states = before
    if result.plan is not None:
        states = states_now(journal.nodes, result.sinfo, result.plan, before, now)
        write_atomic(states_path, json.dumps(states))
    text = render(
        journal.nodes, result.plan, states, journal.section(REPLACE_REQUESTED) or {}, bool(result.paused), now
    )
    write(Path(config.textfile_dir), text)


STATE_SECTIONS = (REPLACE_REQUESTED, RMA_FLAGGED, HEALTH_STRIKES)


def print_state(config: LoopConfig) -> int:
    """The loop journal's sections the workstation acts on, as one JSON object (empty before a round)."""
    journal = Journal(config.stack, root=config.state_dir)  # reads under the journal's own lock
    state = {name: journal.section(name) or ({} if name != HEALTH_STRIKES else []) for name in STATE_SECTIONS}
    print(json.dumps({"stack": config.stack, **state}))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m clusterforge.health.loop", description=__doc__)
    ap.add_argument("--config", default=CONFIG_PATH, help=f"the loop's configuration (default {CONFIG_PATH})")
    ap.add_argument(
        "--state", action="store_true", help="print the loop's requests and strikes as JSON; no round"
    )
    args = ap.parse_args(argv)
    try:
        config = read_config(Path(args.config))
    except ConfigError as exc:
        print(f"health loop: {exc}", file=sys.stderr)
        return 1
    if args.state:
        return print_state(config)
    config.stack_dir.mkdir(parents=True, exist_ok=True)
    with open(config.stack_dir / LOCK_FILE, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("health loop: another round still runs; this one is skipped", file=sys.stderr)
            return 2
        journal = Journal(config.stack, root=config.state_dir)
        result = run_round(config, local_runner(), journal)
        publish(config, journal, result, time.time())
    print(f"health loop: {result.summary()}")
    for note in result.notes:
        print(f"  note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
