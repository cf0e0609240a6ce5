"""What a command does with a shared state: lock, read once, write back; the faults it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from invoke.exceptions import Exit

from clusterforge.journal import Journal, state_root
from clusterforge.lock import StackLocked
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.spec.models import ClusterSpec, State
from clusterforge.state import StateError, changing, holder, reading
from clusterforge.state.fsdir import DirectoryBackend
from clusterforge.state.snapshot import StackState
from clusterforge.tasks._cli import locked


def _spec(backend: str, stack: str = "shared") -> ClusterSpec:
    spec, _ = load_spec(stack_path("local"))
    return spec.model_copy(
        update={"stack": stack, "state": State.model_validate({"backend": backend, "lease_s": 60})}
    )


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    folder = tmp_path / "shared-state"
    folder.mkdir()
    return folder


def _clone(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A runner of its own: its own .clusterforge folder."""
    root = tmp_path / name / ".clusterforge"
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(root))
    return root


def test_a_second_runner_starts_from_what_the_first_wrote(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec(str(shared))
    _clone(tmp_path, "ci", monkeypatch)
    with changing(spec, "invoke up --stack shared", note=lambda _: None):
        Journal("shared").mark_done("node-001", "certified", verdict="pass", run_id="r1")
    assert holder(spec) is None  # released
    laptop = _clone(tmp_path, "laptop", monkeypatch)
    with changing(spec, "invoke certify --stack shared", note=lambda _: None):
        assert Journal("shared").record("node-001").verdict == "pass"
        Journal("shared").mark_failed("node-001", "certified", "clusterforge: matmul-burnin: slow")
    manifest = StackState(DirectoryBackend(shared), "shared").read()
    assert manifest is not None and manifest.serial == 2
    assert manifest.written_by["command"] == "invoke certify --stack shared"
    index = json.loads((laptop / "shared" / "reports" / "index.json").read_text())
    assert index["nodes"]["node-001"]["reason"] == "clusterforge: matmul-burnin: slow"


def test_an_unreachable_backend_stops_the_command_before_anything_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clone(tmp_path, "ci", monkeypatch)
    gone = tmp_path / "not-mounted"
    ran = []
    with pytest.raises(StateError) as err, changing(_spec(str(gone)), "invoke up"):
        ran.append(True)
    assert not ran and str(gone) in str(err.value) and "Nothing was changed on the cluster" in str(err.value)


def test_the_state_is_written_even_when_the_command_fails(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec(str(shared))
    _clone(tmp_path, "ci", monkeypatch)
    with pytest.raises(KeyboardInterrupt), changing(spec, "invoke up", note=lambda _: None):
        Journal("shared").mark_done("node-001", "configured")
        raise KeyboardInterrupt  # Ctrl-C half-way: what was done is still recorded for the next runner
    _clone(tmp_path, "next", monkeypatch)
    with reading(spec):
        assert Journal("shared").is_done("node-001", "configured")


def test_a_write_refused_after_the_command_says_what_is_kept_and_exits_2(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(str(shared))
    ci = _clone(tmp_path, "ci", monkeypatch)
    with changing(spec, "invoke up", note=lambda _: None):
        Journal("shared").mark_done("node-001", "configured")
    store = StackState(DirectoryBackend(shared), "shared")
    with pytest.raises(Exit) as err, locked(spec, "certify"):
        Journal("shared").mark_done("node-002", "configured")
        # someone writes the state behind the lock's back (a copy pushed by hand, say)
        rogue = tmp_path / "rogue" / "shared"
        store.pull(rogue)
        Journal("shared", rogue.parent).mark_done("node-003", "configured")
        store.push(rogue, store.read(), "a hand-made write")
    assert err.value.code == 2
    text = str(err.value.message)
    assert "changed since this command read it" in text and "a hand-made write" in text and str(ci) in text
    assert Journal("shared", ci).is_done("node-002", "configured")  # kept in the working copy


def test_a_busy_stack_exits_2_naming_the_holder(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec(str(shared))
    _clone(tmp_path, "ci", monkeypatch)
    with changing(spec, "invoke up --stack shared", note=lambda _: None):
        assert holder(spec) is not None and holder(spec).command == "invoke up --stack shared"  # type: ignore[union-attr]
        _clone(tmp_path, "laptop", monkeypatch)
        with pytest.raises(Exit) as err, locked(spec, "certify"):
            pytest.fail("entered a held stack")
        assert err.value.code == 2 and "invoke up --stack shared" in str(err.value.message)
        with pytest.raises(StackLocked), changing(spec, "invoke certify", note=lambda _: None):
            pass


def test_reading_uses_a_private_copy_and_takes_no_lock(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec(str(shared))
    mine = _clone(tmp_path, "ci", monkeypatch)
    with changing(spec, "invoke up", note=lambda _: None):
        Journal("shared").mark_done("node-001", "certified", verdict="pass")
        (mine / "shared" / "reports" / "node-001").mkdir(parents=True)
        (mine / "shared" / "reports" / "node-001" / "report.json").write_text("{}")
        with reading(spec):  # a `status` while the command runs: the state as last written
            private = state_root()
            assert private != mine and Journal("shared").nodes == {}
    with reading(spec):
        private = state_root()
        assert Journal("shared").record("node-001").verdict == "pass"
        assert not (
            private / "shared" / "reports"
        ).exists()  # a reader fetches the journal and baselines only
    assert not private.exists() and state_root() == mine


def test_the_local_default_keeps_todays_flock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _clone(tmp_path, "ws", monkeypatch)
    spec = _spec("local", stack="plain")
    with changing(spec, "invoke up", note=lambda _: None):
        Journal("plain").mark_done("node-001", "configured")
        assert (root / "plain" / "lock").read_text()  # the flock record of clusterforge/lock.py
    assert not (root / "plain" / "state-sync.json").exists()
