"""The invoke front door, run the way users and CI run it: `.venv/bin/invoke ...` in the repo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from invoke import Context
from invoke.exceptions import Exit

from clusterforge.spec.checks import check_ids
from clusterforge.tasks import spec as spec_tasks

ROOT = Path(__file__).resolve().parents[1]
INVOKE = Path(sys.executable).parent / "invoke"


def invoke(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if not INVOKE.exists():
        pytest.skip(f"no invoke next to {sys.executable}")
    full_env = {**os.environ, **(env or {})}
    full_env.pop("CLUSTERFORGE_DEBUG", None)
    return subprocess.run(
        [str(INVOKE), *args], cwd=ROOT, capture_output=True, text=True, timeout=120, env=full_env, check=False
    )


@pytest.mark.parametrize("stack", ["prod", "dev", "local"])
def test_example_stacks_pass(stack: str) -> None:
    result = invoke("spec.check", "--stack", stack)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"stacks/{stack}.yaml: ok: stack '{stack}'" in result.stdout


def test_mistyped_instance_type_exits_1_with_key_line_and_suggestion(tmp_path: Path) -> None:
    text = (
        (ROOT / "stacks" / "prod.yaml")
        .read_text()
        .replace("instance_type: p5.48xlarge", "instance_type: p5.48xlarg")
    )
    spec = tmp_path / "typo.yaml"
    spec.write_text(text)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "instance_type: p5.48xlarg" in row)
    result = invoke("spec.check", "--file", str(spec))
    assert result.returncode == 1
    assert f"{spec}:{line}: node_pools[1].instance_type: unknown instance type 'p5.48xlarg'" in result.stdout
    assert "did you mean 'p5.48xlarge'?" in result.stdout
    assert "1 error(s)" in result.stderr and "Traceback" not in result.stderr


def test_unknown_key_exits_1_naming_it(tmp_path: Path) -> None:
    spec = tmp_path / "extra.yaml"
    spec.write_text((ROOT / "stacks" / "local.yaml").read_text() + "colour: blue\n")
    result = invoke("spec.check", "--file", str(spec))
    assert result.returncode == 1
    assert "colour: unknown key 'colour'" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def run_task(task: object, **kwargs: object) -> int:
    """Call a task body in-process (fast); returns the exit code it would give."""
    try:
        task(Context(), **kwargs)  # type: ignore[operator]
    except Exit as exc:
        if exc.message:
            print(exc.message, file=sys.stderr)
        return exc.code
    return 0


def test_json_output_and_suppression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prod = (ROOT / "stacks" / "prod.yaml").read_text()
    assert prod.count("fabric_manager: 580.105.08") == 1  # the edit below must change something
    text = prod.replace("fabric_manager: 580.105.08", "fabric_manager: 580.1.1")
    spec = tmp_path / "fm.yaml"
    spec.write_text(text)
    assert run_task(spec_tasks.check, file=str(spec), json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["errors"] == 1
    (finding,) = [f for f in report["findings"] if f["level"] == "error"]
    assert (finding["check"], finding["path"]) == ("fabric-manager", "software.fabric_manager")
    assert finding["text"].startswith(
        f"{spec}:{finding['line']}: software.fabric_manager: fabric_manager 580.1.1"
    )
    assert run_task(spec_tasks.check, file=str(spec), suppress=["fabric-manager"], json=True) == 0
    assert json.loads(capsys.readouterr().out)["suppressed"] == ["fabric-manager"]


def test_unknown_suppress_id_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_task(spec_tasks.check, stack="prod", suppress=["fabric-manger"]) == 2
    assert "did you mean 'fabric-manager'?" in capsys.readouterr().err


def test_stack_and_file_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_task(spec_tasks.check, stack="prod", file="stacks/prod.yaml") == 2
    assert run_task(spec_tasks.check) == 2
    assert "exactly one of --stack NAME or --file PATH" in capsys.readouterr().err


def test_unreadable_file_and_unknown_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_task(spec_tasks.check, file=str(tmp_path / "nope.yaml")) == 1
    assert "cannot read spec" in capsys.readouterr().out
    assert run_task(spec_tasks.check, stack="prd") == 1
    assert "no stack 'prd' (did you mean 'prod'?)" in capsys.readouterr().err


def test_unexpected_errors_are_one_line_unless_debugging(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(spec_tasks, "check_file", broken)
    monkeypatch.delenv("CLUSTERFORGE_DEBUG", raising=False)
    with pytest.raises(Exit, match="error: RuntimeError: disk on fire \\(set CLUSTERFORGE_DEBUG=1"):
        spec_tasks.check(Context(), stack="prod")
    monkeypatch.setenv("CLUSTERFORGE_DEBUG", "1")
    with pytest.raises(RuntimeError, match="disk on fire"):
        spec_tasks.check(Context(), stack="prod")


def test_schema_is_current_and_checks_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_task(spec_tasks.schema, check=True) == 0
    capsys.readouterr()
    assert run_task(spec_tasks.list_checks) == 0
    assert [row.split()[0] for row in capsys.readouterr().out.splitlines()] == check_ids()


@pytest.mark.slow
def test_test_task_fails_when_no_tests_are_collected(tmp_path: Path) -> None:
    (tmp_path / "empty_dir").mkdir()
    result = invoke(
        "test", "--path", str(tmp_path / "empty_dir"), env={"PYTEST_ADDOPTS": "-p no:cacheprovider"}
    )
    assert result.returncode == 1
    assert "collected no tests" in result.stderr


@pytest.mark.slow
def test_test_task_selects_by_marker_expression(tmp_path: Path) -> None:
    """A quoted marker expression reaches pytest whole (text after `--` is re-split by invoke)."""
    (tmp_path / "test_marks.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.integration\n"
        "def test_slow():\n    pass\n\n"
        "def test_fast():\n    pass\n"
    )
    env = {"PYTEST_ADDOPTS": f"-p no:cacheprovider --rootdir {ROOT} -c {ROOT / 'pyproject.toml'}"}
    result = invoke("test", "--path", str(tmp_path), "--marks", "not integration", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 deselected" in result.stdout
