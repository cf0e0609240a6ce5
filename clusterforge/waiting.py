"""One wait loop for the library: ask, pause, ask again, until the answer is the one wanted or the
deadline has passed.

Every caller used to write this loop by hand (a stack's lock, systemd booting in a container node,
Slurm registering and draining nodes, a cancelled playbook's processes exiting, a round of network
group jobs, an FSx backup). Here it is written once, with the clock and the pause injectable so a
test drives it without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    probe: Callable[[], T],
    done: Callable[[T], bool] = bool,
    *,
    timeout_s: float | None,
    poll_s: float,
    pause_first: bool = False,
    clock: Callable[[], float] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> T:
    """Call ``probe`` until ``done(answer)`` holds or ``timeout_s`` has passed; the last answer.

    Between two probes it sleeps ``poll_s``. The deadline is checked after each probe, so a wait
    always ends on a fresh answer, including one that turned true during the last pause; the
    caller tells a timeout from success by that answer. ``timeout_s=None`` waits for ever.
    ``pause_first``: sleep before the first probe too (the caller already holds a first answer,
    e.g. what a create call returned, and wants the next one). ``clock`` and ``sleep`` default to
    time.monotonic and time.sleep, looked up at the call.
    """
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    deadline = None if timeout_s is None else clock() + timeout_s
    if pause_first:
        sleep(poll_s)
    while True:
        answer = probe()
        if done(answer) or (deadline is not None and clock() >= deadline):
            return answer
        sleep(poll_s)


class PausedTime:
    """A clock that counts only the pauses taken through it: for a wait whose timeout is a number
    of polls (an hour of FSx backup polls), whatever ``sleep`` does, a test's no-op included."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep) -> None:
        self._sleep = sleep
        self.elapsed = 0.0

    def sleep(self, seconds: float) -> None:
        self._sleep(seconds)
        self.elapsed += seconds

    def clock(self) -> float:
        return self.elapsed
