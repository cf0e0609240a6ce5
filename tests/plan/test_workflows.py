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
    spec.check, and plan against a git revision (not lint, test, certify or upgrade)."""
    out = []
    for wf, _, step in steps():
        lines = [x.strip() for x in str(step.get("run", "")).splitlines() if x.strip().startswith(INVOKE)]
        if lines and all(
            task_of(x) == "spec.check" or (task_of(x) == "plan" and "--base" in x) for x in lines
        ):
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
    assert (tmp_path / "output.txt").read_text() == "pending=true\n"  # apply.yml then runs the upgrade


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
    from invoke import Context

    from clusterforge.tasks import dev

    ran: list[str] = []

    class Recorder(Context):
        def run(self, command: str, **kwargs: Any) -> Any:  # type: ignore[override]
            ran.append(command)
            return type("Result", (), {"exited": 0})()

    dev.lint(Recorder())
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
