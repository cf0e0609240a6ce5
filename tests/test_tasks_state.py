"""state.push / state.pull / state.show / state.unlock, in-process (a folder backend: fast)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from clusterforge.journal import Journal
from clusterforge.spec.loader import REPO_ROOT
from clusterforge.state.fsdir import DirectoryBackend
from clusterforge.state.lease import LeaseLock
from clusterforge.state.snapshot import StackState
from clusterforge.tasks import state as tasks
from tests.test_tasks import run_task


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A spec of stack `mig` whose state lives in a shared folder, and a workstation's copy."""
    shared = tmp_path / "shared"
    shared.mkdir()
    spec = yaml.safe_load((REPO_ROOT / "stacks" / "local.yaml").read_text())
    spec["stack"] = "mig"
    spec["state"] = {"backend": str(shared)}
    path = tmp_path / "mig.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "ws"))
    return {"spec": path, "shared": shared, "ws": tmp_path / "ws"}


def _history(root: Path, reason: str = "") -> None:
    journal = Journal("mig", root)
    journal.mark_done("node-001", "certified", verdict="pass", run_id="r1")
    if reason:
        journal.mark_failed("node-002", "certified", reason)
    (root / "mig" / "baselines").mkdir(parents=True, exist_ok=True)
    (root / "mig" / "baselines" / "local.json").write_text("{}")


def test_push_moves_a_local_history_once_and_refuses_to_overwrite_another(
    world: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _history(world["ws"])
    assert run_task(tasks.push, spec=str(world["spec"])) == 0
    out = capsys.readouterr().out
    assert "-> " in out and "the journal, 1 baseline(s)" in out and "serial 1" in out
    assert run_task(tasks.push, spec=str(world["spec"])) == 0
    assert "nothing written" in capsys.readouterr().out
    # another workstation with its own history of the same stack name
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "other"))
    _history(tmp_path / "other", reason="a different past")
    assert run_task(tasks.push, spec=str(world["spec"])) == 2
    err = capsys.readouterr().err
    assert "already holds another history for stack 'mig'" in err and "refusing to overwrite it" in err
    manifest = StackState(DirectoryBackend(world["shared"]), "mig").read()
    assert manifest is not None and manifest.serial == 1  # untouched
    # pull --force takes the backend's and keeps this copy aside
    assert run_task(tasks.pull, spec=str(world["spec"])) == 2
    assert run_task(tasks.pull, spec=str(world["spec"]), force=True) == 0
    assert Journal("mig", tmp_path / "other").record("node-002").reason == ""
    kept = list((tmp_path / "other" / "mig").glob("kept-*"))
    assert len(kept) == 1 and (kept[0] / "journal.log").exists()


def test_show_says_where_what_and_whether_this_copy_is_in_step(
    world: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _history(world["ws"])
    run_task(tasks.push, spec=str(world["spec"]))
    capsys.readouterr()
    assert run_task(tasks.show, spec=str(world["spec"]), json=True) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["backend"] == str(world["shared"]) and data["serial"] == 1 and data["this_copy"] == "in step"
    assert data["written_by"]["command"] == "invoke state.push" and data["lock"] is None
    Journal("mig", world["ws"]).annotate("node-001", certifying="r2")
    assert run_task(tasks.show, spec=str(world["spec"])) == 0
    assert "changes not written to the backend" in capsys.readouterr().out


def test_unlock_removes_only_a_lock_whose_lease_ran_out_unless_forced(
    world: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    backend = DirectoryBackend(world["shared"])
    LeaseLock(backend, "mig", "invoke up --stack mig", lease_s=600, note=lambda _: None).acquire()
    assert run_task(tasks.unlock, spec=str(world["spec"])) == 2
    assert "invoke up --stack mig" in capsys.readouterr().err
    assert run_task(tasks.unlock, spec=str(world["spec"]), force=True) == 0
    assert backend.get("mig/lock.json") is None


def test_a_stack_with_local_state_is_told_to_name_a_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_task(tasks.show, stack="local") == 2
    assert "state.backend: local" in capsys.readouterr().err
