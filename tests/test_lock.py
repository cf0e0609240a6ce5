"""The per-stack lock: one command at a time, who holds it, dead holders taken over, bad files named."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from clusterforge.lock import LockError, StackLocked, ago, current_holder, read_holder, stack_lock


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def _hold(stack: str, started: multiprocessing.synchronize.Event, command: str) -> None:  # type: ignore[name-defined]
    with stack_lock(stack, command, note=lambda _: None):
        started.set()
        time.sleep(60)


def _holder_process(stack: str, command: str = "invoke up --stack s") -> multiprocessing.Process:
    ctx = multiprocessing.get_context("fork")
    started = ctx.Event()
    proc = ctx.Process(target=_hold, args=(stack, started, command), daemon=True)
    proc.start()
    assert started.wait(20), "the holder never took the lock"
    return proc


def test_a_second_command_is_refused_naming_the_holder(_state: Path) -> None:
    proc = _holder_process("s", "invoke up --stack s")
    try:
        with pytest.raises(StackLocked) as err, stack_lock("s", "invoke certify --stack s"):
            pytest.fail("entered a held lock")
        text = str(err.value)
        assert "invoke up --stack s" in text and f"pid {proc.pid}" in text and "since" in text
        assert "--wait" in text and str(_state / "s" / "lock") in text
        assert err.value.holder is not None and err.value.holder.pid == proc.pid
        holder = current_holder("s")
        assert holder is not None and holder.pid == proc.pid  # status reads it without the lock
    finally:
        proc.kill()
        proc.join()


def test_other_stacks_are_independent() -> None:
    proc = _holder_process("a")
    try:
        with stack_lock("b", "invoke up --stack b", note=lambda _: None) as me:
            assert me.pid == os.getpid()
    finally:
        proc.kill()
        proc.join()


def test_a_lock_left_by_a_killed_process_is_taken_over_with_a_note(_state: Path) -> None:
    proc = _holder_process("s", "invoke up --stack s")
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    assert read_holder(_state / "s" / "lock") is not None  # its record is still there
    assert current_holder("s") is None  # but nobody holds it
    notes: list[str] = []
    with stack_lock("s", "invoke up --stack s", note=notes.append) as me:
        assert me.pid == os.getpid()
    assert len(notes) == 1 and "taking over the lock left by" in notes[0] and str(proc.pid) in notes[0]
    assert (_state / "s" / "lock").read_text() == ""  # released cleanly: empty
    with stack_lock("s", "again", note=notes.append):
        pass
    assert len(notes) == 1  # a cleanly released lock needs no note


def test_wait_waits_for_the_holder() -> None:
    proc = _holder_process("s")
    notes: list[str] = []
    killer = subprocess.Popen([sys.executable, "-c", f"import os,time;time.sleep(1.5);os.kill({proc.pid},9)"])
    try:
        with stack_lock("s", "invoke certify --stack s", wait=True, poll_s=0.2, note=notes.append):
            proc.join(5)
            assert proc.exitcode is not None  # entered only once the holder was gone
    finally:
        killer.wait()
        proc.join()
    assert notes and "waiting for it (--wait)" in notes[0]


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("not json at all", "is not a clusterforge lock record"),
        (json.dumps({"kind": "something-else", "pid": 1}), "is not a clusterforge lock record"),
        (json.dumps({"kind": "clusterforge-stack-lock"}), "is not a clusterforge lock record"),
    ],
)
def test_a_foreign_lock_file_is_named_with_the_fix(_state: Path, content: str, says: str) -> None:
    path = _state / "s" / "lock"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(LockError) as err, stack_lock("s", "x"):
        pytest.fail("entered with a foreign lock file")
    assert says in str(err.value) and f"rm {path}" in str(err.value)
    assert path.read_text() == content  # never overwritten


def test_an_unusable_lock_path_is_named(_state: Path) -> None:
    path = _state / "s" / "lock"
    path.mkdir(parents=True)  # a folder where the lock file belongs (root can read any file)
    with pytest.raises(LockError, match="cannot be opened") as err, stack_lock("s", "x"):
        pass
    assert str(path) in str(err.value) and "remove it" in str(err.value)


def test_ago_reads_like_a_person() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert ago((now - timedelta(seconds=5)).isoformat(), now) == "5 s ago"
    assert ago((now - timedelta(minutes=12)).isoformat(), now) == "12 min ago"
    assert ago((now - timedelta(hours=3, minutes=4)).isoformat(), now) == "3 h 4 min ago"
    assert ago((now - timedelta(days=2)).isoformat(), now) == "2 d ago"
    assert ago("garbage", now) == "garbage"
