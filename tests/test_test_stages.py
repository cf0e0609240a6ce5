"""`invoke test`'s stages: the phases split the suite exactly, the fast tier comes first and alone,
a stage's phases run at the same time with their output told apart and their counts read, a
background phase runs niced beside the later stages and starts no container, and any phase's
failure (or empty collection) fails the run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusterforge.tasks.test_stages import (
    PHASES,
    STAGES,
    SUMMARY,
    Outcome,
    Phase,
    chosen_stages,
    describe,
    pytest_argv,
    run_stages,
    verdict,
)

REPO = Path(__file__).resolve().parents[1]
STATIC = "tests/integration/test_static_stack.py"  # its own nodes, judged by floors: beside the roles
BAKED = "tests/integration/test_baked_image.py"  # its own builder and node, judged by nothing: beside them


# One collection of everything (``-m ""``: no marker filter), each test with its markers as the
# hooks left them (tests/integration/conftest.py adds shared_stack, tests/fixtures/aws.py slow).
COLLECT = """
import json, sys, pytest
class Marks:
    def pytest_collection_finish(self, session):
        rows = {i.nodeid: sorted({m.name for m in i.iter_markers()}) for i in session.items}
        print("MARKS " + json.dumps(rows))
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "", "tests"], plugins=[Marks()]))
"""


def _collected() -> dict[str, set[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", COLLECT], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("MARKS ")]
    return {test: set(marks) for test, marks in json.loads(line[len("MARKS ") :]).items()}


class _Marks(dict[str, bool]):
    """A name lookup for eval: a marker a test has is true, any other name false."""

    def __missing__(self, name: str) -> bool:
        return False


def _under(test: str, path: str) -> bool:
    """A test id is under a folder (``path/...``) or in a file (``path::...``), as pytest reads them."""
    path = path.rstrip("/")
    return test == path or test.startswith((path + "/", path + "::"))


def selects(args: tuple[str, ...], test: str, marks: set[str]) -> bool:
    """Whether ``pytest ARGS`` runs ``test``: its paths and ``--ignore=`` by prefix, ``-m`` by the
    expression (``and``/``or``/``not``/parentheses over marker names: Python's own precedence)."""
    paths, ignored, expr = [], [], ""
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "-m":
            expr = rest.pop(0)
        elif arg.startswith("--ignore="):
            ignored.append(arg.split("=", 1)[1])
        elif not arg.startswith("-"):
            paths.append(arg)
        else:
            raise AssertionError(f"a phase's argument this test cannot read: {arg!r}")
    assert re.fullmatch(r"[\w\s()]*", expr), expr
    inside = any(_under(test, p) for p in paths)
    outside = any(_under(test, p) for p in ignored)
    return (
        inside
        and not outside
        and (not expr or bool(eval(expr, {"__builtins__": {}}, _Marks.fromkeys(marks, True))))
    )


@pytest.mark.slow
def test_the_phases_split_the_default_suite_exactly() -> None:
    tests = _collected()
    assert len(tests) > 1000
    default = ("tests", "-m", "not long")  # pyproject's addopts
    everything = {t for t, marks in tests.items() if selects(default, t, marks)}
    phases = {
        name: {t for t, m in tests.items() if selects(phase.args, t, m)} for name, phase in PHASES.items()
    }
    assert all(phases.values()), [name for name, chosen in phases.items() if not chosen]
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
    assert not any(t.startswith(STATIC) for t in certification)  # floors judge it: not alone
    shared = {
        t for n in names if n != "certification" for t in phases[n] if t.startswith("tests/integration/")
    }
    assert shared and all(t.startswith((STATIC, BAKED)) for t in shared), sorted(shared)


def test_the_selection_reader_follows_pytest() -> None:
    args = ("tests", "--ignore=tests/roles", "-m", "integration and not (shared_stack or long)")
    assert selects(args, "tests/x/test_a.py::t", {"integration"})
    assert not selects(args, "tests/roles/test_a.py::t", {"integration"})
    assert not selects(args, "tests/x/test_a.py::t", {"integration", "shared_stack"})
    assert not selects(("tests/roles",), "tests/rolesque/test_a.py::t", set())
    assert selects(("tests/test_a.py",), "tests/test_a.py::t", set())  # a file, as pytest takes it
    assert not selects(("tests", "--ignore=tests/test_a.py"), "tests/test_a.py::t[1]", set())
    assert selects(("tests", "--ignore=tests/test_a.py"), "tests/test_ab.py::t", set())
    assert selects(
        ("tests", "-m", "not integration and not slow"), "tests/test_a.py::t[1-2]", {"parametrize"}
    )
    with pytest.raises(AssertionError, match="cannot read"):
        selects(("tests", "-k", "spec"), "tests/test_a.py::t", set())


def test_the_fast_tier_runs_first_on_every_core_and_certification_last_alone() -> None:
    assert [p.name for p in STAGES[0]] == ["fast", "workloads"] and [p.name for p in STAGES[-1]] == [
        "certification"
    ]
    fast = PHASES["fast"]
    assert fast.args[-1] == "not integration and not slow and not long" and fast.workers == "auto"
    assert pytest_argv("py", fast, ["-x"])[:7] == ["py", "-m", "pytest", "tests", "-m", fast.args[-1], "-n"]
    assert "-n" not in pytest_argv("py", PHASES["certification"], [])  # one process: it judges speed


def test_only_the_slow_tier_runs_in_the_background_niced_and_it_starts_no_container() -> None:
    background = [p for p in PHASES.values() if p.background]
    assert [p.name for p in background] == ["slow"]
    (slow,) = background
    assert "not integration" in slow.args[-1]  # the certification stage may run beside it
    assert pytest_argv("py", slow, [])[:4] == ["nice", "-n", "19", "py"]
    assert pytest_argv("py", PHASES["certification"], [])[0] == "py"
    assert not any(p.background for p in STAGES[-1])


def test_the_workloads_judged_by_floors_share_no_stage_with_a_container_and_are_not_niced() -> None:
    # Every local node's cgroup weighs 64 processes: beside one, a floor or a 2-s deadline fails a
    # healthy machine (CI, 2026-12-05: "device 0: not ready within 2 s").
    (stage,) = [stage for stage in STAGES if PHASES["workloads"] in stage]
    for phase in stage:
        assert "not integration" in phase.args[-1], phase.name
    assert not PHASES["workloads"].background


def test_chosen_phases_keep_the_stages_order_and_a_typo_names_the_phases() -> None:
    stages = chosen_stages(["certification", "roles", "slow"])
    assert [[p.name for p in stage] for stage in stages] == [["slow", "roles"], ["certification"]]
    assert chosen_stages(["fast"]) == ((PHASES["fast"],),)
    with pytest.raises(
        ValueError,
        match="unknown test phase.*rolls.*fast, workloads, slow, roles, cluster-roles, containers, certification",
    ):
        chosen_stages(["rolls"])


@pytest.mark.parametrize(
    ("line", "counts"),
    [
        (
            "========== 1203 passed, 4 skipped, 350 deselected in 95.21s (0:01:35) ==========\n",
            "1203 passed, 4 skipped, 350 deselected",
        ),
        ("==== 2 failed, 10 passed, 1 warning in 3.10s ====\n", "2 failed, 10 passed, 1 warning"),
        ("=========== no tests ran in 0.01s ===========\n", "no tests ran"),
        ("=========================== short test summary info ============================\n", None),
        ("tests/x.py::test_y PASSED in 1.0s\n", None),
    ],
)
def test_the_summary_line_gives_the_counts(line: str, counts: str | None) -> None:
    found = SUMMARY.match(line)
    assert (found["counts"].rstrip(", ") if found else None) == counts


def test_describe_says_wall_time_and_counts() -> None:
    line = describe(Outcome("fast", 0, 95.2, "1203 passed, 4 skipped"))
    assert line == "test phase fast: passed (pytest exit 0) after 95 s wall: 1203 passed, 4 skipped"


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


def _stub_python(folder: Path, waiter: tuple[str, Path, str], others: str) -> Path:
    """A stand-in "python" (a shell script). ``waiter`` = (a phase's name, a flag file, what it does then):
    that phase polls for the flag up to 30 s (exit 3 without it); ``others`` are the other phases' case arms."""
    name, flag, then = waiter
    stub = folder / "python"
    stub.write_text(
        f"""#!/bin/sh
case "$*" in
  *{name}*) i=0
    while [ ! -e {flag} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
    [ -e {flag} ] || exit 3
    {then};;
{others}
esac
"""
    )
    stub.chmod(0o755)
    return stub


def test_a_stages_phases_run_at_the_same_time_and_their_lines_are_told_apart(tmp_path: Path) -> None:
    # A stand-in "python": phase "first" waits for a file that only phase "second" writes, so the
    # stage can end only when both run at once (a serial runner would hang until the timeout).
    flag = tmp_path / "second-ran"
    stub = _stub_python(
        tmp_path,
        ("first", flag, 'echo "saw second"; sleep 0.3; echo "==== 3 passed in 1.00s ===="; exit 0'),
        f'  *second*) touch {flag}; echo "args $*"; echo "== 1 failed, 2 passed in 0.50s =="; exit 1;;',
    )
    stage = (Phase("first", ("tests/first",), "waits"), Phase("second", ("tests/second",), "writes"))
    lines: list[str] = []
    outcomes = run_stages(str(stub), (stage,), ["--durations=5"], tmp_path, dict(os.environ), lines.append)
    assert [(o.phase, o.code, o.counts) for o in outcomes] == [
        ("first", 0, "3 passed"),
        ("second", 1, "1 failed, 2 passed"),
    ]
    first, second = outcomes
    assert second.seconds < first.seconds  # each phase's own time: "second" ended first
    assert "[first] saw second\n" in lines
    second = next(line for line in lines if line.startswith("[second] args "))
    assert "-m pytest tests/second -o cache_dir=.pytest_cache/second --durations=5" in second
    assert verdict(outcomes, selects=False) == 1


def test_ci_runs_every_phase() -> None:
    """.ci/run names every phase, the first stage's first (a lint-fast failure stops the run before the
    long tiers), each once: a new phase left out there would never run in CI."""
    text = (REPO / ".ci" / "run").read_text()
    first, rest = re.findall(r"invoke test --phases (\S+)", text)
    assert first.split(",") == [p.name for p in STAGES[0]]
    assert [*first.split(","), *rest.split(",")] == list(PHASES)


def test_a_background_phase_runs_on_beside_the_next_stage_niced(tmp_path: Path) -> None:
    # "bg" waits for a file that only the next stage's "later" writes: the run ends only when the
    # next stage starts without waiting for "bg" (a runner that waited would hang until the timeout).
    flag = tmp_path / "later-ran"
    stub = _stub_python(
        tmp_path,
        ("bg", flag, 'echo "niceness $(nice)"; echo "==== 2 passed in 9.00s ===="; exit 0'),
        '  *quick*) echo "niceness $(nice)"; echo "==== 1 passed in 0.10s ===="; exit 0;;\n'
        f'  *later*) touch {flag}; echo "==== 4 passed in 0.20s ===="; exit 0;;',
    )
    stages = (
        (Phase("bg", ("tests/bg",), "waits", background=True), Phase("quick", ("tests/quick",), "ends")),
        (Phase("later", ("tests/later",), "writes"),),
    )
    lines: list[str] = []
    outcomes = run_stages(str(stub), stages, [], tmp_path, dict(os.environ), lines.append)
    assert [(o.phase, o.code, o.counts) for o in outcomes] == [
        ("bg", 0, "2 passed"),
        ("quick", 0, "1 passed"),
        ("later", 0, "4 passed"),
    ]
    base = os.nice(0)  # ours: `nice -n 19` adds to it, up to the kernel's 19
    assert f"[bg] niceness {min(19, base + 19)}\n" in lines and f"[quick] niceness {base}\n" in lines
    assert "[later] ==== 4 passed in 0.20s ====\n" in lines  # told apart: "bg" still ran beside it
