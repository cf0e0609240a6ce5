"""invoke benchmark: option errors, the lock, what it prints (in-process, fast; the runs are faked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterforge.benchmark import run as bench_run
from clusterforge.tasks import benchmark as tasks
from tests.test_tasks import run_task


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def test_bad_options_exit_2_naming_the_value(state: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_task(tasks.benchmark, stack="local", nodes="1,x") == 2
    assert "'x' is not a node count" in capsys.readouterr().err
    assert run_task(tasks.benchmark, stack="local", workload="training") == 2
    assert "give train, infer, data or all" in capsys.readouterr().err


def test_json_goes_to_stdout_and_progress_to_stderr(
    state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, object] = {}

    def fake(spec, workloads, counts, note):
        seen.update(stack=spec.stack, workloads=workloads, counts=counts)
        note("train-1n: done in 3 s")
        doc = {
            "run_id": "r",
            "verdict": {
                "ok": False,
                "lines": ["gate FAILED: min_scaling_efficiency 0.8: 2 nodes 0.5 (under)"],
            },
        }
        return bench_run.Outcome(
            1, doc, {"result": "/x/result.json", "html": "/x/report.html", "raw": "/x/raw"}
        )

    monkeypatch.setattr(bench_run, "benchmark", fake)
    assert run_task(tasks.benchmark, stack="local", workload="train", nodes="2,1", json=True, html=True) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["run_id"] == "r"
    assert "train-1n: done in 3 s" in out.err and "gate FAILED: min_scaling_efficiency" in out.err
    assert "html: /x/report.html" in out.err
    assert seen == {"stack": "local", "workloads": ["train"], "counts": [1, 2]}


def test_the_task_is_registered(state: Path) -> None:
    import tasks as front

    assert "benchmark" in front.ns.task_names
