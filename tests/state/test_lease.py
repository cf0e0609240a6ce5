"""The stack lock as a lease in a shared backend: one winner among racers, every time; a holder
that died is taken over once its lease ran out, with a note; a live holder never is."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any

import pytest

from clusterforge.lock import LockError, StackLocked
from clusterforge.state.backend import Backend
from clusterforge.state.lease import LeaseLock, current_holder, lock_key
from tests.state.conftest import make_backend

ROUNDS = {"dir": 100, "s3": 50}  # racing rounds per backend (a round on moto costs ~0.1 s)


def _racer(kind: str, where: str, me: int, rounds: int, barrier: Any, results: Any) -> None:
    backend = make_backend(kind, where)  # built after fork: its own client
    for round_ in range(rounds):
        lock = LeaseLock(backend, "race", f"invoke up (racer {me})", lease_s=60, note=lambda _: None)
        barrier.wait()
        try:
            lock.acquire()
            won = True
        except StackLocked:
            won = False
        barrier.wait()  # both have tried while the winner holds it
        if won:
            lock.release()
        results.put((round_, me, won))
        barrier.wait()  # released before the next round starts


def test_two_processes_racing_exactly_one_wins_every_time(where: tuple[str, str]) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2, timeout=60), ctx.Queue()
    rounds = ROUNDS[where[0]]
    procs = [ctx.Process(target=_racer, args=(*where, me, rounds, barrier, results)) for me in (1, 2)]
    for proc in procs:
        proc.start()
    outcomes: dict[int, list[bool]] = {}
    for _ in range(2 * rounds):
        round_, _, won = results.get(timeout=120)
        outcomes.setdefault(round_, []).append(won)
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    assert len(outcomes) == rounds
    assert all(sorted(won) == [False, True] for won in outcomes.values()), outcomes


def test_a_second_command_is_refused_naming_the_holder(backend: Backend) -> None:
    holder = LeaseLock(backend, "s", "invoke up --stack s", note=lambda _: None)
    holder.acquire()
    try:
        with pytest.raises(StackLocked) as err:
            LeaseLock(backend, "s", "invoke certify --stack s").acquire()
        text = str(err.value)
        assert "invoke up --stack s" in text and f"pid {os.getpid()}" in text and "--wait" in text
        assert backend.where(lock_key("s")) in text and "lease renewed" in text
        assert current_holder(backend, "s") is not None  # `status` sees it without the lock
    finally:
        holder.release()
    assert backend.get(lock_key("s")) is None and current_holder(backend, "s") is None


def _hold_until_killed(kind: str, where: str, lease_s: int, ready: Any) -> None:
    lock = LeaseLock(
        make_backend(kind, where), "s", "invoke up --stack s", lease_s=lease_s, note=lambda _: None
    )
    lock.acquire()
    lock.start_renewing()
    ready.set()
    time.sleep(600)


def _killed_holder(where: tuple[str, str], lease_s: int) -> int:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold_until_killed, args=(*where, lease_s, ready), daemon=True)
    proc.start()
    assert ready.wait(60), "the holder never took the lock"
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    return proc.pid


def test_a_killed_holder_is_taken_over_once_its_lease_ran_out(where: tuple[str, str]) -> None:
    backend = make_backend(*where)
    pid = _killed_holder(where, lease_s=120)
    with pytest.raises(StackLocked, match=f"pid {pid}"):  # its lease still runs: refused, not guessed
        LeaseLock(backend, "s", "invoke certify --stack s").acquire()
    notes: list[str] = []
    later = LeaseLock(
        backend, "s", "invoke certify --stack s", note=notes.append, clock=lambda: time.time() + 121
    )
    later.acquire()  # the same record, read 121 s later: its lease ran out
    assert len(notes) == 1 and "taking over the lock left by `invoke up --stack s`" in notes[0]
    assert f"pid {pid}" in notes[0] and "lease ran out" in notes[0]
    later.release()


@pytest.mark.slow  # waits out a real 2 s lease
def test_wait_takes_over_when_the_lease_runs_out_for_real(where: tuple[str, str]) -> None:
    backend = make_backend(*where)
    pid = _killed_holder(where, lease_s=2)
    notes: list[str] = []
    lock = LeaseLock(backend, "s", "invoke certify --stack s --wait", note=notes.append)
    lock.acquire(wait=True, poll_s=0.5)
    try:
        assert any("taking over the lock left by" in n and f"pid {pid}" in n for n in notes), notes
    finally:
        lock.release()


def test_a_live_holder_renews_and_is_never_taken_over(backend: Backend) -> None:
    now = [1000.0]
    holder = LeaseLock(backend, "s", "invoke up", lease_s=30, note=lambda _: None, clock=lambda: now[0])
    holder.acquire()
    for _ in range(5):  # an hour-long command, renewing every 10 s
        now[0] += 10
        assert holder.renew()
    other = LeaseLock(backend, "s", "invoke certify", clock=lambda: now[0] + 25)
    with pytest.raises(StackLocked):
        other.acquire()
    holder.release()


def test_of_two_runners_taking_over_one_wins_and_the_old_holder_learns_it(backend: Backend) -> None:
    notes: list[str] = []
    old = LeaseLock(backend, "s", "invoke up", lease_s=30, note=notes.append, clock=lambda: 1000.0)
    old.acquire()
    late = [
        LeaseLock(backend, "s", f"invoke certify {i}", lease_s=30, note=lambda _: None, clock=lambda: 1100.0)
        for i in (1, 2)
    ]
    late[0].acquire()
    with pytest.raises(StackLocked, match="invoke certify 1"):
        late[1].acquire()  # it read the same stale record; the lock is now certify 1's, live
    assert not old.renew() and "taken over" in old.lost and "invoke certify 1" in old.lost
    old.release()  # does not remove the new holder's lock
    assert current_holder(backend, "s", clock=lambda: 1100.0) is not None
    late[0].release()


@pytest.mark.parametrize(
    "content",
    [b"not json", b'{"kind": "something-else"}', b'{"kind": "clusterforge-stack-lock", "version": 2}'],
)
def test_a_foreign_lock_object_is_named_and_never_replaced(backend: Backend, content: bytes) -> None:
    backend.put(lock_key("s"), content)
    with pytest.raises(LockError) as err:
        LeaseLock(backend, "s", "invoke up").acquire()
    assert backend.where(lock_key("s")) in str(err.value) and "state.unlock" in str(err.value)
    blob = backend.get(lock_key("s"))
    assert blob is not None and blob.data == content
