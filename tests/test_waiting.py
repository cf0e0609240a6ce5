"""clusterforge/waiting.py: the one wait loop, driven by a fake clock (no test waits)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from clusterforge.waiting import PausedTime, wait_until


class Clock:
    """Time moves only when the loop sleeps; every call is logged in order."""

    def __init__(self) -> None:
        self.now = 0.0
        self.log: list[str] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.log.append(f"sleep {seconds:g}")
        self.now += seconds

    def probe(self, answers: Iterator[int]) -> Callable[[], int]:
        def ask() -> int:
            answer = next(answers)
            self.log.append(f"probe@{self.now:g}={answer}")
            return answer

        return ask


def test_it_asks_until_the_answer_is_done_and_returns_that_answer() -> None:
    t = Clock()
    got = wait_until(t.probe(iter([0, 0, 7])), timeout_s=60, poll_s=2, clock=t.clock, sleep=t.sleep)
    assert got == 7
    assert t.log == ["probe@0=0", "sleep 2", "probe@2=0", "sleep 2", "probe@4=7"]


def test_at_the_deadline_it_returns_the_last_answer_asked_after_the_last_pause() -> None:
    t = Clock()
    got = wait_until(
        t.probe(iter([1, 2, 3, 4])), lambda n: n > 9, timeout_s=3, poll_s=2, clock=t.clock, sleep=t.sleep
    )
    # 0 s, 2 s: still waiting; the pause to 4 s crosses the deadline, and that last answer is returned
    assert got == 3
    assert t.log == ["probe@0=1", "sleep 2", "probe@2=2", "sleep 2", "probe@4=3"]


def test_a_done_first_answer_never_sleeps() -> None:
    t = Clock()
    assert wait_until(t.probe(iter([1])), timeout_s=0, poll_s=5, clock=t.clock, sleep=t.sleep) == 1
    assert t.log == ["probe@0=1"]


def test_pause_first_sleeps_before_the_first_probe() -> None:
    t = Clock()
    got = wait_until(
        t.probe(iter([0, 5])), timeout_s=60, poll_s=3, pause_first=True, clock=t.clock, sleep=t.sleep
    )
    assert got == 5
    assert t.log == ["sleep 3", "probe@3=0", "sleep 3", "probe@6=5"]


def test_no_timeout_waits_for_ever() -> None:
    t = Clock()
    answers = iter([0] * 1000 + [1])
    assert wait_until(t.probe(answers), timeout_s=None, poll_s=3600, clock=t.clock, sleep=t.sleep) == 1
    assert t.now == 1000 * 3600


def test_paused_time_counts_the_pauses_even_when_sleep_does_nothing() -> None:
    slept: list[float] = []
    paused = PausedTime(slept.append)
    answers = iter(["CREATING"] * 10)
    got = wait_until(
        lambda: next(answers), lambda s: s == "AVAILABLE", timeout_s=120, poll_s=60,
        clock=paused.clock, sleep=paused.sleep,
    )  # fmt: skip
    assert got == "CREATING" and slept == [60, 60] and paused.elapsed == 120


def test_an_exception_from_the_probe_is_the_callers() -> None:
    def broken() -> int:
        raise RuntimeError("controller gone")

    with pytest.raises(RuntimeError, match="controller gone"):
        wait_until(broken, timeout_s=10, poll_s=1, sleep=lambda _: None)
