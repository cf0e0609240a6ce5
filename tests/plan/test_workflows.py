"""The CI workflows: pinned, least-privilege, and their `invoke` steps work on a spec change.

The cheap steps (spec.check, plan) are run for real, as the workflow's shell would run them, in a
throw-away copy of this tree with a git history: a base commit, then a spec change on top.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterforge.spec.loader import REPO_ROOT
from tests.plan.conftest import commit, git

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
INVOKE = ".venv/bin/invoke "
# Tasks a workflow may name before they exist (apply.yml once waited for `upgrade`; it exists now).
PENDING: set[str] = set()  # tasks a workflow may name before they exist (none now)
COPY = ("clusterforge", "roles", "playbooks", "stacks", "validators", "schemas", "tasks.py", ".yamllint")


def workflows() -> dict[str, dict[str, Any]]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(WORKFLOWS.glob("*.yml"))}


def steps() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    out = []
    for name, wf in workflows().items():
        for job in wf["jobs"].values():
            for step in job["steps"]:
                out.append((name, job, step))
    return out


def invoke_lines() -> list[str]:
    lines = []
    for _, _, step in steps():
        for line in str(step.get("run", "")).splitlines():
            if line.strip().startswith(INVOKE):
                lines.append(line.strip())
    return lines


def task_of(line: str) -> str:
    return line[len(INVOKE) :].split()[0]


def test_the_three_workflows_exist() -> None:
    assert set(workflows()) == {"cluster-change.yml", "apply.yml", "certify.yml"}


def test_every_action_is_pinned_by_full_sha_with_its_tag() -> None:
    for name, _, step in steps():
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), (name, step["uses"])
    for path in WORKFLOWS.glob("*.yml"):
        for line in path.read_text().splitlines():
            if "uses:" in line:
                assert re.search(r"@[0-9a-f]{40} # v\d", line), f"{path.name}: say the tag: {line.strip()}"


def test_least_privilege_and_no_persisted_credentials() -> None:
    for name, wf in workflows().items():
        assert wf["permissions"] == {}, f"{name}: top-level permissions must be empty"
        for job_name, job in wf["jobs"].items():
            assert job.get("permissions", {}).get("contents") == "read", (name, job_name)
            assert "write" not in {
                v for k, v in job["permissions"].items() if k not in ("id-token", "checks")
            }
    for name, _, step in steps():
        if str(step.get("uses", "")).startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False, name


def test_apply_waits_for_an_environment_approval() -> None:
    job = workflows()["apply.yml"]["jobs"]["apply"]
    assert job["environment"] == "${{ matrix.stack }}"
    assert job["concurrency"]["cancel-in-progress"] is False


def test_certify_takes_stack_nodes_and_profile_and_keeps_the_reports() -> None:
    wf = workflows()["certify.yml"]
    on = wf.get("on") or wf.get(True)  # YAML 1.1 reads the key `on` as true
    assert set(on["workflow_dispatch"]["inputs"]) == {"stack", "nodes", "profile"}
    uses = [s.get("uses", "") for s in wf["jobs"]["certify"]["steps"]]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    assert any(u.startswith("mikepenz/action-junit-report@") for u in uses)


def test_a_pull_request_runs_for_every_file_that_can_change_behaviour() -> None:
    wf = workflows()["cluster-change.yml"]
    on = wf.get("on") or wf.get(True)  # YAML 1.1 reads the key `on` as true
    patterns = on["pull_request"]["paths"]
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    # Documentation only: README.md, docs/, a role's README. Everything else is code, a test, a
    # setting or data some code reads.
    behaviour = [f for f in tracked if not (f.startswith("docs/") or f.endswith(".md"))]
    assert len(behaviour) > 500
    uncovered = [f for f in behaviour if not any(_matches(f, p) for p in patterns)]
    assert uncovered == [], f"add these to cluster-change.yml's paths: {sorted(uncovered)[:20]}"
    for must in ("clusterforge/**", "tests/**", "pyproject.toml", "tasks.py", ".ci/**"):
        assert must in patterns


def _matches(path: str, pattern: str) -> bool:
    """GitHub's paths filter for the two forms used: ``folder/**`` and an exact file."""
    return path.startswith(pattern[: -len("**")]) if pattern.endswith("/**") else path == pattern


def test_the_test_jobs_are_the_staged_suites_phases() -> None:
    from clusterforge.tasks.test_stages import PHASES

    job = workflows()["cluster-change.yml"]["jobs"]["test"]
    assert [row["phase"] for row in job["strategy"]["matrix"]["include"]] == list(PHASES)
    assert job["strategy"]["fail-fast"] is False  # one tier's failure does not hide another's
    (run,) = [s["run"] for s in job["steps"] if "invoke test" in str(s.get("run", ""))]
    assert run.startswith('.venv/bin/invoke test --phases "$PHASE"')


@pytest.mark.slow
def test_every_invoke_step_names_a_task_that_exists() -> None:
    listed = subprocess.run(
        [str(REPO_ROOT / ".venv" / "bin" / "invoke"), "--list"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    known = {line.split()[0] for line in listed.splitlines()[1:] if line.strip()}
    named = {task_of(line) for line in invoke_lines()}
    assert named >= {"lint", "test", "spec.check", "plan", "certify", "upgrade"}
    assert named - known <= PENDING, f"workflows name tasks that do not exist: {named - known - PENDING}"


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, str]:
    """A copy of this tree with a base commit and a pinned version bumped on top."""
    root = tmp_path / "tree"
    for part in COPY:
        src = REPO_ROOT / part
        if src.is_dir():
            shutil.copytree(src, root / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, root / part)
    (root / ".venv").symlink_to(REPO_ROOT / ".venv")
    (root / ".gitignore").write_text(".venv\n")
    spec = (root / "stacks" / "local.yaml").read_text()
    # A stack of its own: never the machine's `local` stack or its containers.
    (root / "stacks" / "wftest.yaml").write_text(spec.replace("stack: local", "stack: wftest", 1))
    git(root, "init", "-q", "-b", "main")
    commit(root, "base")
    base = git(root, "rev-parse", "HEAD").strip()
    wf = root / "stacks" / "wftest.yaml"
    wf.write_text(wf.read_text().replace("slurm: 22.05.8", "slurm: 22.05.9", 1))
    return root, base


def cheap_steps() -> list[tuple[str, str]]:
    """(workflow: step name, run script) of the steps whose invoke commands are all cheap here:
    spec.check, and plan (not lint, test, certify or upgrade)."""
    out = []
    for wf, _, step in steps():
        lines = [x.strip() for x in str(step.get("run", "")).splitlines() if x.strip().startswith(INVOKE)]
        if lines and all(task_of(x) in ("spec.check", "plan") for x in lines):
            out.append((f"{wf}: {step.get('name', '')}", str(step["run"])))
    return out


def run_step(script: str, root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """As GitHub runs a `run:` block on Linux: bash -e, in the checkout."""
    full = {k: v for k, v in os.environ.items() if k != "CLUSTERFORGE_DEBUG"}
    full.update(env)
    return subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=root,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def step_env(tmp_path: Path, base: str) -> dict[str, str]:
    return {
        "STACK": "wftest",
        "BASE_SHA": base,  # cluster-change.yml: the pull request's base
        "BEFORE_SHA": base,  # apply.yml: the commit before the push
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "GITHUB_OUTPUT": str(tmp_path / "output.txt"),
        "CLUSTERFORGE_STATE_DIR": str(tmp_path / "state"),
    }


@pytest.mark.slow
def test_the_cheap_steps_run_on_a_spec_change(tree: tuple[Path, str], tmp_path: Path) -> None:
    root, base = tree
    found = cheap_steps()
    names = " ".join(name for name, _ in found)
    assert "Spec checks" in names and names.count("Plan") == 2, names
    for name, script in found:
        proc = run_step(script, root, step_env(tmp_path, base))
        assert proc.returncode == 0, f"{name}\n{proc.stdout}\n{proc.stderr}"
        if "spec.check" in script:
            assert proc.stdout.count("ok: stack") == 3 and "::error" not in proc.stdout
    text = (tmp_path / "summary.md").read_text()
    assert text.startswith("### clusterforge plan: stack `wftest`")
    assert text.count("### clusterforge plan") == 2  # cluster-change.yml's and apply.yml's plan steps
    # the compute nodes: one row
    group = r"\| `node-\[001-00\d\]` \| \d \| node \| keep \| slurm \|  \| yes \|"
    assert re.search(group, text), text
    assert "slurm_version 22.05.8 -> 22.05.9" in text
    # the runner's state holds nothing applied for this stack: both compared with the base commit
    assert text.count(f"no applied state recorded yet: compared with {base} instead") == 2
    assert (tmp_path / "output.txt").read_text() == "pending=true\n"  # apply.yml then runs the upgrade


def _applied_in_backend(root: Path, spec_text: str, shared: Path, tmp_path: Path) -> None:
    """What a runner's `up` of ``spec_text`` would have left in the shared state backend."""
    import yaml

    from clusterforge.journal import Journal
    from clusterforge.plan.applied import record_converged
    from clusterforge.spec.loader import load_spec
    from clusterforge.state.fsdir import DirectoryBackend
    from clusterforge.state.snapshot import StackState

    applied = tmp_path / "applied.yaml"
    applied.write_text(spec_text)
    spec, _ = load_spec(applied)
    names = [n for pool in spec.node_pools for n in spec.node_names(pool)]
    runner = tmp_path / "earlier-runner"
    record_converged(Journal("wftest", runner), spec, names, root)
    StackState(DirectoryBackend(shared), "wftest").push(runner / "wftest", None, "invoke up --stack wftest")
    assert yaml.safe_load(spec_text)["stack"] == "wftest"


@pytest.mark.slow
@pytest.mark.parametrize("applied", ["base", "by hand"])
def test_the_apply_plan_compares_with_the_applied_state_in_the_backend(
    tree: tuple[Path, str], tmp_path: Path, applied: str
) -> None:
    """apply.yml's plan reads what was applied from the stack's backend, not the commit before:
    a change someone already applied by hand is no change; the base commit's state is."""
    root, base = tree
    shared = tmp_path / "shared-state"
    shared.mkdir()
    spec = root / "stacks" / "wftest.yaml"
    with_backend = spec.read_text() + f"state:\n  backend: {shared}\n"
    spec.write_text(with_backend)
    before = git(root, "show", f"{base}:stacks/wftest.yaml")
    _applied_in_backend(root, before if applied == "base" else with_backend, shared, tmp_path)
    ((name, script),) = [(n, s) for n, s in cheap_steps() if n.startswith("apply.yml")]
    proc = run_step(script, root, step_env(tmp_path, base))
    assert proc.returncode == 0, f"{name}\n{proc.stdout}\n{proc.stderr}"
    text = (tmp_path / "summary.md").read_text()
    assert "compared with" not in text  # the applied state was found: no fallback to the commit
    if applied == "base":
        assert "last applied state (journal)" in text and "slurm_version 22.05.8 -> 22.05.9" in text
        assert (tmp_path / "output.txt").read_text() == "pending=true\n"
    else:  # already applied (by hand, or an earlier run): nothing pending though the commit changed
        assert "slurm_version" not in text
        assert (tmp_path / "output.txt").read_text() == "pending=false\n"


@pytest.mark.slow
def test_the_plan_steps_fail_the_job_on_a_bad_spec(tree: tuple[Path, str], tmp_path: Path) -> None:
    root, base = tree
    spec = root / "stacks" / "wftest.yaml"
    spec.write_text(spec.read_text().replace("count: 4", "count: -4", 1))
    plans = [(name, script) for name, script in cheap_steps() if "plan" in script]
    assert len(plans) == 2
    for name, script in plans:
        proc = run_step(script, root, step_env(tmp_path, base))
        assert proc.returncode == 1, name
        assert "stacks/wftest.yaml" in proc.stderr + proc.stdout


def test_lint_runs_actionlint_and_zizmor_offline_over_the_workflows() -> None:
    from clusterforge.tasks import dev

    ran = [cmd for _, cmd in dev.lint_steps()]
    by_name = {cmd.split()[0].rsplit("/", 1)[-1]: cmd for cmd in ran}
    assert by_name["actionlint"].endswith(" .github/workflows/*.yml")
    assert by_name["zizmor"].endswith(" --offline .github/workflows")
    assert ".github/workflows" in by_name["yamllint"]


@pytest.mark.parametrize("tool", ["actionlint", "zizmor"])
def test_the_workflow_linters_pass_on_the_workflows(tool: str) -> None:
    binary = REPO_ROOT / ".venv" / "bin" / tool
    if not binary.exists():
        pytest.fail(
            f"{binary} missing: run `bash scripts/setup.sh --dev` (scripts/setup.d/60-workflows-dev.pip)"
        )
    argv = [str(binary), *sorted(str(p) for p in WORKFLOWS.glob("*.yml"))]
    if tool == "zizmor":
        argv = [str(binary), "--offline", str(WORKFLOWS)]
    proc = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
