"""`invoke test` over the whole suite: tiers of pytest runs in stages, the ones that judge speed alone.

The tiers (pyproject's markers): `fast` is every test that needs no container, tool chain or
server (unmarked), run on every core with pytest-xdist; `slow` starts real tool chains without
containers (ansible-playbook, torch/gloo, a second Python, Pulumi programs, gpg); `integration`
starts containers (`roles`, `cluster-roles`, `containers`), and the certification suites on the
shared local stack.

The fast tier runs first, beside the validators' workloads only (`workloads`: no container): a minute
or two to know a change is good. The certification
suites (tests/integration) judge every node's figures against the fleet and a stored baseline, so
no other container may share the machine with them: every local node's cgroup weighs as much as
64 processes (providers/local/share.py), and a run beside the other container suites failed
healthy nodes 70-87 % under their baseline. The role and other container tests use loose floors or
none, so they run side by side in the second stage, and the certification suites after them.

The slow tier starts no container. Less the tests that judge this machine's own speed (`workloads`,
first stage), it runs niced (19) in the background from the second stage on,
on the CPU the others leave, and the certification stage does not wait for it: beside the nodes'
weight a niced process is what the certification's own busy-host tests run beside (a niced busy
loop per core, tests/integration/stack.py), and both stages leave CPU idle, the nodes being capped
at their shares (rehearsal 6 ran the slow tier beside the container tiers, un-niced: 2,557 s of
the second stage's ~2,560, against 832 s alone).
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
NICE = 19  # a background phase's niceness: a CFS weight of 15 beside a plain process's 1024


@dataclass(frozen=True)
class Phase:
    name: str
    args: tuple[str, ...]  # pytest arguments that select the tests: paths and the marker expression
    why: str
    workers: str = ""  # pytest-xdist's -n (e.g. "auto": one process per core); "" runs in-process
    # Niced, started with its stage and not waited for by the later stages (the module's docstring).
    background: bool = False


FAST = "not integration and not slow and not long"

# Stages run in order; the phases of one stage run at the same time. `shared_stack` marks the tests
# on the session's shared local stack (tests/integration/conftest.py): the static stack's test has
# its own two nodes, no fleet and no stored baseline, so floors judge it and it runs in the second.
# The cluster roles' module (one fixture: two converges of a head and two compute nodes, ~920 s
# in rehearsal 6) is a phase of its own, so that it runs beside the other role tests, not before them.
CLUSTER_ROLES = "tests/roles/test_cluster_roles.py"
SLOW = "slow and not integration and not long"
# Slow tests that run the validators' workloads on this machine and judge their figures by floors (a
# CPU matmul of at least 1 GFLOP/s) or by deadlines (a device not ready within seconds). They run beside
# the fast tier, never beside a container: every local node's cgroup weighs 64 plain processes
# (providers/local/share.py), so beside the container tiers they got a tenth of a core niced (rehearsal 7:
# 0.92 and 0.98 GFLOP/s) and un-niced missed a 2-s readiness deadline (CI, 2026-12-05).
WORKLOADS = ("tests/validators", "tests/test_gpu_device_check.py")
STAGES: tuple[tuple[Phase, ...], ...] = (
    (
        Phase("fast", ("tests", "-m", FAST), "no container, tool chain or server; every core", "auto"),
        Phase(
            "workloads",
            (*WORKLOADS, "-m", SLOW),
            "the validators' workloads, judged by floors: beside no container",
        ),
    ),
    (
        # Two workers: the tool chains wait on their processes as much as they compute.
        Phase(
            "slow",
            ("tests", *(f"--ignore={path}" for path in WORKLOADS), "-m", SLOW),
            "real tool chains, niced in the background: the CPU the others leave, through certification",
            "2",
            background=True,
        ),
        Phase(
            "roles",
            ("tests/roles", f"--ignore={CLUSTER_ROLES}", "-m", "integration and not long"),
            "the node roles converged on containers",
        ),
        Phase(
            "cluster-roles",
            (CLUSTER_ROLES, "-m", "integration and not long"),
            "the cluster roles converged on a head and two compute containers",
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
            "the shared local stack, judged against its fleet and baseline: no other container beside it",
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
    seconds: float  # wall time, from the phase's start to its end
    counts: str = ""  # pytest's summary, e.g. "1203 passed, 4 skipped, 350 deselected"


# pytest's last line: "==== 1203 passed, 4 skipped in 95.21s (0:01:35) ====" (with or without xdist)
SUMMARY = re.compile(r"^=+ (?P<counts>(\d+ [a-z]+(, )?)+|no tests ran) in [\d.]+s\b")


def pytest_argv(python: str, phase: Phase, extra: Sequence[str]) -> list[str]:
    # Each phase keeps its own cache folder: two pytest processes writing one cache race.
    workers = ["-n", phase.workers] if phase.workers else []
    niced = ["nice", "-n", str(NICE)] if phase.background else []  # inherited by all it starts
    return [
        *niced,
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


@dataclass
class _Running:
    phase: Phase
    proc: subprocess.Popen[str]
    reader: threading.Thread
    counts: list[str]
    started: float
    ended: float | None = None


def _start(
    python: str,
    phase: Phase,
    extra: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    out: tuple[threading.Lock, Callable[[str], None]],
    prefixed: bool,
) -> _Running:
    lock, write = out
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
    prefix = f"[{phase.name}] " if prefixed else ""
    counts: list[str] = []
    reader = threading.Thread(target=_stream, args=(proc, prefix, lock, write, counts), daemon=True)
    reader.start()
    return _Running(phase, proc, reader, counts, time.monotonic())


def run_stages(
    python: str,
    stages: Sequence[Sequence[Phase]],
    extra: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    write: Callable[[str], None] = _print,
) -> list[Outcome]:
    """Run the stages in order, the phases of a stage at the same time. A stage ends when its phases
    have, except a background one: that runs on beside the later stages, and the run ends when every
    phase has. Each line carries its phase's name whenever another phase may be running."""
    out = (threading.Lock(), write)
    running: list[_Running] = []

    def wait_for(phases: list[_Running]) -> None:
        # In the order they end, so each phase's time is its own, not the slowest one before it.
        while any(r.ended is None for r in phases):
            for r in running:
                if r.ended is None and not r.reader.is_alive():
                    r.ended = time.monotonic()
            time.sleep(0.2)

    try:
        for stage in stages:
            prefixed = len(stage) > 1 or any(r.ended is None for r in running)
            started = [_start(python, phase, extra, cwd, env, out, prefixed) for phase in stage]
            running += started
            wait_for([r for r in started if not r.phase.background])
        wait_for(running)
        return [
            Outcome(
                r.phase.name,
                r.proc.wait(),
                (r.ended or r.started) - r.started,
                r.counts[-1] if r.counts else "",
            )
            for r in running
        ]
    finally:
        for r in running:  # interrupted: no pytest (nor its containers' owner) outlives us
            if r.proc.poll() is None:
                r.proc.terminate()
                r.proc.wait()


def describe(outcome: Outcome) -> str:
    state = {0: "passed", PYTEST_NO_TESTS: "collected no tests"}.get(outcome.code, "FAILED")
    counts = f": {outcome.counts}" if outcome.counts else ""
    return (
        f"test phase {outcome.phase}: {state} (pytest exit {outcome.code}) after {outcome.seconds:.0f} s wall"
        f"{counts}"
    )
