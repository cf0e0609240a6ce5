"""baseline.show / export / import: in-process (fast), plus their registration in tasks.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterforge.certify.fleet.baseline import Baseline, BaselineStore, Sample
from clusterforge.tasks import baseline as tasks
from tests.test_tasks import invoke, run_task


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def seed(stack: str, kind: str = "local", versions: dict[str, str] | None = None) -> Path:
    b = Baseline(kind, stack)
    for i, v in enumerate([46.0, 46.5, 47.0]):
        b.add(
            "matmul-burnin.rate",
            "GFLOP/s",
            True,
            Sample(v, f"node-00{i}", "r1", "t", versions or {"slurm": "22.05.8"}),
        )
    return BaselineStore(stack).save(b)


def test_show_prints_each_metric_reference_and_json(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_task(tasks.show, stack="lab") == 0
    assert "lab: no baselines yet" in capsys.readouterr().out
    path = seed("lab")
    assert run_task(tasks.show, stack="lab") == 0
    out = capsys.readouterr().out
    assert f"local: {path}" in out
    assert "matmul-burnin.rate" in out and "46.5 GFLOP/s" in out and "median of 3 sample(s), 3 node(s)" in out
    assert "versions slurm 22.05.8" in out
    assert run_task(tasks.show, stack="lab", json=True) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baselines"][0]["metrics"]["matmul-burnin.rate"]["reference"] == 46.5


def test_show_names_a_corrupt_file_and_exits_1(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = seed("lab")
    path.write_text("{")
    assert run_task(tasks.show, stack="lab") == 1
    err = capsys.readouterr().err
    assert f"{path}: not a usable baseline (not JSON" in err and "Traceback" not in err


def test_export_then_import_seeds_another_stack_of_the_same_type(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed("lab")
    out = tmp_path / "local.json"
    assert run_task(tasks.export, stack="lab", type="local", out=str(out)) == 0
    assert (
        run_task(tasks.import_, stack="local", file=str(out)) == 0
    )  # stacks/local.yaml: pools of type local
    imported = BaselineStore("local").load("local")
    assert imported is not None and imported.stack == "lab"  # the file keeps where it was recorded
    assert len(imported.metrics["matmul-burnin.rate"].samples) == 3
    assert run_task(tasks.import_, stack="local", file=str(out)) == 1
    assert "exists; give --replace" in capsys.readouterr().err
    assert run_task(tasks.import_, stack="local", file=str(out), replace=True) == 0


def test_import_refuses_a_foreign_type_or_schema(
    state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed("lab", kind="p5.48xlarge")
    out = tmp_path / "p5.json"
    assert run_task(tasks.export, stack="lab", type="p5.48xlarge", out=str(out)) == 0
    capsys.readouterr()
    assert run_task(tasks.import_, stack="local", file=str(out)) == 1
    assert "stack 'local' has compute pools of local only" in capsys.readouterr().err
    assert run_task(tasks.import_, stack="local", file=str(out), type="local") == 1
    assert "it is the baseline of instance type 'p5.48xlarge', not 'local'" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "superbench-baseline", "metrics": {}}))
    assert run_task(tasks.import_, stack="local", file=str(other)) == 1
    assert "schema 'superbench-baseline', expected 'clusterforge-baseline'" in capsys.readouterr().err
    assert not BaselineStore("local").types()


def test_export_of_a_missing_type_says_what_is_stored(
    state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed("lab")
    assert run_task(tasks.export, stack="lab", type="p5.48xlarge") == 1
    err = capsys.readouterr().err
    assert "no baseline for 'p5.48xlarge'" in err and "(stored: local)" in err


def test_the_tasks_are_registered() -> None:
    result = invoke("--list")
    assert result.returncode == 0, result.stderr
    for name in ("baseline.show", "baseline.export", "baseline.import"):
        assert name in result.stdout
