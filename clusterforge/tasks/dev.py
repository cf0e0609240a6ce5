"""Developer tasks: the test suite and the linters, exactly as CI runs them."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

from invoke import Context, task
from invoke.exceptions import Exit

from clusterforge.tasks.test_stages import (
    PHASES,
    PYTEST_NO_TESTS,
    STAGES,
    Phase,
    chosen_stages,
    describe,
    run_stages,
    verdict,
)

ROOT = Path(__file__).resolve().parents[2]


def _bin(name: str) -> str:
    """A tool from the same venv as this Python, so `invoke` from .venv/bin uses .venv's tools."""
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


@task(
    help={
        "fast": "only the fast tier: no container, tool chain or server, on every core (pytest-xdist)",
        "phases": f"only these phases of the staged suite, comma separated: {', '.join(PHASES)}",
        "path": "test path(s) to run instead of tests/ (space separated)",
        "marks": "pytest -m expression; selects by marker (one pytest run)",
        "serial": "run the whole suite's phases one after another (a busy machine, or to time each)",
    }
)
def test(
    c: Context,
    fast: bool = False,
    phases: str = "",
    path: str = "tests",
    marks: str = "",
    serial: bool = False,
) -> None:
    """Run pytest over tests/ with this venv's Python.

    The whole suite (no path, no --marks) runs in stages (clusterforge/tasks/test_stages.py): the
    fast tier on every core beside the validators' workloads (no container); then the role tests and the other container tests side by side,
    with the slow tier (real tool chains, no container) niced in the background; then the
    certification suites with no other container beside them, since they judge speed, while the
    slow tier goes on. Each phase's last line gives its wall time and test counts. `--fast` runs the fast
    tier only (what to run after every change); `--phases slow,roles` the named phases only.
    Extra pytest arguments go after `--`, e.g. `invoke test --fast -- -k spec -x` (invoke joins
    them with spaces, so pass quoted expressions through --marks). Exits with pytest's code; no
    tests collected (pytest's 5) is a failure."""
    extra = shlex.split(c.remainder)
    if fast or phases:
        if path != "tests" or marks:
            raise Exit(
                "--fast and --phases choose phases of the staged suite: give no path or --marks", code=1
            )
        names = ["fast"] if fast else [n.strip() for n in phases.split(",") if n.strip()]
        try:
            stages = chosen_stages(names)
        except ValueError as exc:
            raise Exit(str(exc), code=1) from None
        _test_in_stages(extra, serial, stages)
        return
    if path == "tests" and not marks:
        _test_in_stages(extra, serial, STAGES)
        return
    select = f"-m {shlex.quote(marks)}" if marks else ""
    cmd = f"{shlex.quote(sys.executable)} -m pytest {shlex.quote(path)} {select} {c.remainder}".strip()
    result = c.run(cmd, warn=True, pty=False, env={"PYTHONDONTWRITEBYTECODE": "1"})
    code = result.exited if result is not None else 1
    if code == PYTEST_NO_TESTS:
        raise Exit(f"pytest collected no tests from {path!r}: that is a failure", code=1)
    if code != 0:
        raise Exit(code=code)


def _test_in_stages(extra: list[str], serial: bool, chosen: tuple[tuple[Phase, ...], ...]) -> None:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    # --serial: one phase at a time, each waited for (a background phase too).
    stages = [(replace(p, background=False),) for s in chosen for p in s] if serial else chosen
    outcomes = run_stages(sys.executable, stages, extra, ROOT, env)
    sys.stdout.flush()
    for outcome in outcomes:
        print(describe(outcome), flush=True)
    code = verdict(outcomes, selects=any(a.startswith(("-k", "--lf", "--deselect")) for a in extra))
    if code != 0:
        raise Exit(f"tests failed: {', '.join(o.phase for o in outcomes if o.code != 0)}", code=code)


def _has_yaml(folder: Path) -> bool:
    return folder.is_dir() and (any(folder.rglob("*.yml")) or any(folder.rglob("*.yaml")))


def _ansible_targets() -> list[str]:
    """roles/ when it holds a role (a folder with tasks/), playbooks/ when it holds playbooks."""
    targets = []
    roles = ROOT / "roles"
    if roles.is_dir() and any((d / "tasks").is_dir() for d in roles.iterdir() if d.is_dir()):
        targets.append("roles")
    playbooks = ROOT / "playbooks"
    if playbooks.is_dir() and any(playbooks.glob("*.yml")):
        targets.append("playbooks")
    return targets


@task(name="lint")  # (called, so that mypy sees a Task for tasks.py's add_task)
def lint(c: Context) -> None:
    """Run ruff, mypy, yamllint and ansible-lint as CI does.

    ruff check, ruff format --check, mypy (pyproject's [tool.mypy], pydantic plugin), yamllint --strict (stacks/ roles/ playbooks/ clusterforge/data/
    .github/workflows/, config .yamllint), ansible-lint --profile production (roles/ playbooks/, when
    they hold any), and over .github/workflows/ actionlint and zizmor --offline.
    Runs every step, side by side on the machine's cores (each step's output printed whole when it
    ends, with its time), then fails naming the ones that failed."""
    failed = [name for name, code in _run_side_by_side(lint_steps()) if code != 0]
    if failed:
        raise Exit(f"lint failed: {', '.join(failed)}", code=1)


def lint_steps() -> list[tuple[str, str]]:
    """(name, shell command) of each linter `invoke lint` runs, for what this tree holds."""
    steps: list[tuple[str, str]] = [
        ("ruff check", f"{_bin('ruff')} check ."),
        ("ruff format", f"{_bin('ruff')} format --check ."),
        ("mypy", _bin("mypy")),  # the files and settings: pyproject.toml [tool.mypy]
    ]
    yaml_dirs = [
        d
        for d in ("stacks", "roles", "playbooks", "clusterforge/data", ".github/workflows")
        if _has_yaml(ROOT / d)
    ]
    if yaml_dirs:
        steps.append(("yamllint", f"{_bin('yamllint')} --strict -c .yamllint {' '.join(yaml_dirs)}"))
    ansible = _ansible_targets()
    if ansible:
        steps.append(("ansible-lint", f"{_bin('ansible-lint')} --profile production {' '.join(ansible)}"))
    workflows = ROOT / ".github" / "workflows"
    if _has_yaml(workflows):
        # actionlint: workflow syntax, expressions, action inputs; zizmor: workflow security
        # (unpinned actions, template injection, excessive permissions). --offline: no network.
        steps.append(("actionlint", f"{_bin('actionlint')} .github/workflows/*.yml"))
        steps.append(("zizmor", f"{_bin('zizmor')} --offline .github/workflows"))
    return steps


def _run_side_by_side(steps: list[tuple[str, str]]) -> list[tuple[str, int]]:
    """Each (name, shell command) in ROOT, as many at once as there are cores: the steps are
    independent, and mypy and ansible-lint each hold one core for minutes. Each step's output is
    printed whole when it ends (never interleaved); returns (name, exit code) in step order."""

    def one(cmd: str) -> tuple[int, str, float]:
        started = time.monotonic()
        done = subprocess.run(cmd, shell=True, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", check=False)  # fmt: skip
        return done.returncode, done.stdout, time.monotonic() - started

    codes: dict[str, int] = {}
    workers = max(1, len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        # the two long ones first, so that they start at once and the short ones fill in beside them
        first = sorted(steps, key=lambda step: step[0] not in ("mypy", "ansible-lint"))
        running = {pool.submit(one, cmd): name for name, cmd in first}
        for future in as_completed(running):
            name = running[future]
            code, output, seconds = future.result()
            codes[name] = code
            state = "ok" if code == 0 else f"FAILED (exit {code})"
            print(f"==> {name}: {state} after {seconds:.0f} s", flush=True)
            if output.strip():
                print(output.rstrip(), flush=True)
    return [(name, codes[name]) for name, _ in steps]
