"""`invoke test` over the whole suite: tiers of pytest runs in stages, the ones that judge speed alone.

The tiers (pyproject's markers): `fast` is every test that needs no container, tool chain or
server (unmarked), run on every core with pytest-xdist; `slow` starts real tool chains without
containers (ansible-playbook, torch/gloo, a second Python, Pulumi programs, gpg); `integration`
starts containers (`roles`, `containers`), and the certification suites on the shared local stack.

The fast tier runs first, alone: a minute or two to know a change is good. The certification
suites (tests/integration) judge every node's figures against the fleet and a stored baseline, so
whatever else shares the machine's cores is what they would measure (a run beside other container
suites here failed healthy nodes 70-87 % under their baseline). Nothing else in the suite judges
speed against peers: the slow tier, the role tests and the other container tests use loose floors
or none, so they run side by side in the second stage, and the certification suites run alone
after.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

PYTEST_NO_TESTS = 5  # pytest's exit code when it collected nothing


@dataclass(frozen=True)
class Phase:
    name: str
    args: tuple[str, ...]  # pytest arguments that select the tests: paths and the marker expression
    why: str
    workers: str = ""  # pytest-xdist's -n (e.g. "auto": one process per core); "" runs in-process


FAST = "not integration and not slow and not long"

# Stages run in order; the phases of one stage run at the same time. `shared_stack` marks the tests
# on the session's shared local stack (tests/integration/conftest.py): the static stack's test has
# its own two nodes, no fleet and no stored baseline, so floors judge it and it runs in the second.
STAGES: tuple[tuple[Phase, ...], ...] = (
    (Phase("fast", ("tests", "-m", FAST), "no container, tool chain or server; every core", "auto"),),
    (
        # Two workers: the tool chains wait on their processes as much as they compute.
        Phase("slow", ("tests", "-m", "slow and not integration and not long"), "real tool chains", "2"),
        Phase(
            "roles", ("tests/roles", "-m", "integration and not long"), "the roles converged on containers"
        ),
        Phase(
            "containers",
            ("tests", "--ignore=tests/roles", "-m", "integration and not shared_stack and not long"),
            "providers and the static stack on containers; judged by floors, not against a fleet",
        ),
    ),
    (
        Phase(
            "certification",
            ("tests", "-m", "shared_stack and not long"),
            "the shared local stack, judged against its fleet and baseline: alone",
        ),
    ),
)
PHASES: dict[str, Phase] = {phase.name: phase for stage in STAGES for phase in stage}


def chosen_stages(names: Sequence[str]) -> tuple[tuple[Phase, ...], ...]:
    """The stages cut down to the named phases (in the stages' order); a clear error for a typo."""
    unknown = [n for n in names if n not in PHASES]
    if unknown:
        raise ValueError(f"unknown test phase(s) {', '.join(unknown)}; the phases: {', '.join(PHASES)}")
    stages = (tuple(p for p in stage if p.name in names) for stage in STAGES)
    return tuple(stage for stage in stages if stage)


@dataclass(frozen=True)
class Outcome:
    phase: str
    code: int
    seconds: float  # wall time, from the stage's start to this phase's end
    counts: str = ""  # pytest's summary, e.g. "1203 passed, 4 skipped, 350 deselected"


# pytest's last line: "==== 1203 passed, 4 skipped in 95.21s (0:01:35) ====" (with or without xdist)
SUMMARY = re.compile(r"^=+ (?P<counts>(\d+ [a-z]+(, )?)+|no tests ran) in [\d.]+s\b")


def pytest_argv(python: str, phase: Phase, extra: Sequence[str]) -> list[str]:
    # Each phase keeps its own cache folder: two pytest processes writing one cache race.
    workers = ["-n", phase.workers] if phase.workers else []
    return [
        python,
        "-m",
        "pytest",
        *phase.args,
        *workers,
        "-o",
        f"cache_dir=.pytest_cache/{phase.name}",
        *extra,
    ]


def verdict(outcomes: Sequence[Outcome], selects: bool) -> int:
    """The run's exit code: the first phase's failure; a phase that collected nothing fails unless
    the extra arguments select tests (``-k``), and then only when no phase collected any."""
    codes = [o.code for o in outcomes]
    failed = [c for c in codes if c not in (0, PYTEST_NO_TESTS)]
    if failed:
        return failed[0]
    if PYTEST_NO_TESTS in codes and (not selects or all(c == PYTEST_NO_TESTS for c in codes)):
        return 1
    return 0


def _stream(
    proc: subprocess.Popen[str],
    prefix: str,
    lock: threading.Lock,
    write: Callable[[str], None],
    counts: list[str],
) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        summary = SUMMARY.match(line)
        if summary:
            counts.append(summary["counts"].rstrip(", "))
        with lock:
            write(f"{prefix}{line}")
    proc.wait()


def _print(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()  # CI logs are files: each line shows as it comes, not at the end of a buffer


def run_stage(
    python: str,
    stage: Sequence[Phase],
    extra: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    write: Callable[[str], None] = _print,
) -> list[Outcome]:
    """Run a stage's phases at the same time; each line of their output carries the phase's name."""
    lock = threading.Lock()
    started = time.monotonic()
    running = []
    for phase in stage:
        with lock:
            write(f"==> test phase {phase.name}: {phase.why}\n")
        proc = subprocess.Popen(
            pytest_argv(python, phase, extra),
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        prefix = f"[{phase.name}] " if len(stage) > 1 else ""
        counts: list[str] = []
        reader = threading.Thread(target=_stream, args=(proc, prefix, lock, write, counts), daemon=True)
        reader.start()
        running.append((phase, proc, reader, counts))
    ended: dict[str, float] = {}
    try:
        # In the order they end, so each phase's time is its own, not the slowest one before it.
        while len(ended) < len(running):
            for phase, _, reader, _ in running:
                if phase.name not in ended and not reader.is_alive():
                    ended[phase.name] = time.monotonic() - started
            time.sleep(0.2)
        outcomes = [
            Outcome(phase.name, proc.wait(), ended[phase.name], counts[-1] if counts else "")
            for phase, proc, _, counts in running
        ]
    finally:
        for _, proc, _, _ in running:  # interrupted: no pytest (nor its containers' owner) outlives us
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
    return outcomes


def describe(outcome: Outcome) -> str:
    state = {0: "passed", PYTEST_NO_TESTS: "collected no tests"}.get(outcome.code, "FAILED")
    counts = f": {outcome.counts}" if outcome.counts else ""
    return (
        f"test phase {outcome.phase}: {state} (pytest exit {outcome.code}) after {outcome.seconds:.0f} s wall"
        f"{counts}"
    )
