"""`invoke test`'s stages: the phases split the suite exactly, a stage's phases run at the same
time with their output told apart, and any phase's failure (or empty collection) fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterforge.tasks.test_stages import STAGES, Outcome, Phase, run_stage, verdict

REPO = Path(__file__).resolve().parents[1]
STATIC = "tests/integration/test_static_stack.py"  # its own nodes, judged by floors: the first stage


def _collected(*args: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {line for line in proc.stdout.splitlines() if "::" in line}


@pytest.mark.slow
def test_the_phases_split_the_default_suite_exactly() -> None:
    everything = _collected("tests")  # the default selection (pyproject: not long)
    phases = {phase.name: _collected(*phase.args) for stage in STAGES for phase in stage}
    union = set().union(*phases.values())
    assert union == everything, {
        "missing": sorted(everything - union)[:20],
        "extra": sorted(union - everything)[:20],
    }
    names = sorted(phases)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not phases[a] & phases[b], (a, b, sorted(phases[a] & phases[b])[:5])
    certification = phases["certification"]
    assert certification and all(t.startswith("tests/integration/") for t in certification)
    assert not any(t.startswith(STATIC) for t in certification)  # floors judge it: the first stage
    shared = {
        t for n in names if n != "certification" for t in phases[n] if t.startswith("tests/integration/")
    }
    assert shared and all(t.startswith(STATIC) for t in shared), sorted(shared)


@pytest.mark.parametrize(
    ("codes", "selects", "expected"),
    [
        ((0, 0, 0), False, 0),
        ((0, 1, 0), False, 1),
        ((0, 0, 2), False, 2),
        ((0, 5, 0), False, 1),  # a phase that collected nothing is a failure...
        ((0, 5, 0), True, 0),  # ...unless -k chose the tests, and another phase ran some
        ((5, 5, 5), True, 1),
    ],
)
def test_verdict(codes: tuple[int, ...], selects: bool, expected: int) -> None:
    assert verdict([Outcome(f"p{i}", c, 1.0) for i, c in enumerate(codes)], selects) == expected


def test_a_stages_phases_run_at_the_same_time_and_their_lines_are_told_apart(tmp_path: Path) -> None:
    # A stand-in "python": phase "first" waits for a file that only phase "second" writes, so the
    # stage can end only when both run at once (a serial runner would hang until the timeout).
    stub = tmp_path / "python"
    flag = tmp_path / "second-ran"
    stub.write_text(
        f"""#!/bin/sh
case "$*" in
  *first*) i=0
    while [ ! -e {flag} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
    [ -e {flag} ] || exit 3
    echo "saw second"; sleep 1; exit 0;;
  *second*) touch {flag}; echo "args $*"; exit 1;;
esac
"""
    )
    stub.chmod(0o755)
    stage = (Phase("first", ("tests/first",), "waits"), Phase("second", ("tests/second",), "writes"))
    lines: list[str] = []
    outcomes = run_stage(str(stub), stage, ["--durations=5"], tmp_path, dict(os.environ), lines.append)
    assert [(o.phase, o.code) for o in outcomes] == [("first", 0), ("second", 1)]
    first, second = outcomes
    assert second.seconds < first.seconds  # each phase's own time: "second" ended first
    assert "[first] saw second\n" in lines
    second = next(line for line in lines if line.startswith("[second] args "))
    assert "-m pytest tests/second -o cache_dir=.pytest_cache/second --durations=5" in second
    assert verdict(outcomes, selects=False) == 1
