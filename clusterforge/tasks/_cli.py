"""What every task shares: errors as one readable line, tracebacks only when debugging."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar, cast

from invoke.exceptions import Exit, Failure, UnexpectedExit

from clusterforge.spec.loader import SpecError
from clusterforge.spec.models import ClusterSpec

F = TypeVar("F", bound=Callable[..., Any])

DEBUG_ENV = "CLUSTERFORGE_DEBUG"


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV) == "1"


def friendly(func: F) -> F:
    """Turn an unexpected exception into ``Exit(message, 1)``; CLUSTERFORGE_DEBUG=1 re-raises it."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (Exit, Failure, UnexpectedExit):
            raise
        except SpecError as exc:
            if debugging():
                raise
            raise Exit("\n".join(f.render() for f in exc.findings), code=1) from None
        except Exception as exc:
            if debugging():
                raise
            raise Exit(
                f"error: {type(exc).__name__}: {exc} (set {DEBUG_ENV}=1 for a traceback)", code=1
            ) from None

    return cast(F, wrapper)  # functools.wraps keeps the signature mypy cannot follow


EXIT_BUSY = 2  # the stack's lock is held by another command (or its lock file is unusable)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM stops the body as Ctrl-C does (``KeyboardInterrupt``: the command's exit 130), and
    however the body ends, no ansible-playbook this process started outlives it.

    ansible-playbook runs in a session of its own (ansible-runner's pexpect), so neither signal
    reaches it; without this a killed `invoke up`/`certify` left it driving the nodes. A second
    signal while the runs are being stopped is not allowed to cut that short (``kill -9`` still
    can; the lock's flock goes with the process, and the next command notes the takeover)."""
    from clusterforge.ansible.runner import active_runs, stop_active_runs

    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread; a caller there installs them
        return
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        if stopping:
            running = len(active_runs())
            print(
                f"{signal.Signals(signum).name}: still stopping {running} Ansible run(s); wait a few seconds",
                file=sys.stderr,
                flush=True,
            )
            return
        stopping = True
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        stopping = True
        try:
            left = stop_active_runs()
            if left:
                pids = " ".join(map(str, left))
                print(f"warning: Ansible processes would not stop: kill -9 {pids}", file=sys.stderr)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _spec_of(stack_or_spec: ClusterSpec | str) -> ClusterSpec | None:
    if not isinstance(stack_or_spec, str):
        return stack_or_spec
    from clusterforge.state.config import spec_for_stack

    return spec_for_stack(stack_or_spec)


@contextmanager
def locked(stack_or_spec: ClusterSpec | str, command: str, wait: bool = False) -> Iterator[None]:
    """Hold the stack's lock and state (clusterforge/state) around a task that changes the stack.

    Held by another command: exit 2 at once naming the holder (or wait, with ``--wait``). The
    command line is recorded so that a refused command can say exactly what runs. With a shared
    state backend (the spec's ``state.backend``) the lock is a lease there, the state is read once
    before the body and written back after it; a backend that cannot be reached stops the command
    before anything changes (exit 1), a foreign or concurrently written state is refused (exit 2).
    Inside, SIGTERM and SIGINT are handled by ``interruptible``: every Ansible run of the command is
    stopped before the lock is released, so the lock never reads free while a playbook runs."""
    from clusterforge.lock import LockError, stack_lock
    from clusterforge.state import StateError, changing

    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    line = " ".join(["invoke", *sys.argv[1:]]) if argv0 in ("invoke", "inv") else f"invoke {command}"
    spec = _spec_of(stack_or_spec)
    note = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    try:
        hold: AbstractContextManager[object]
        if spec is None:  # a stack with no spec file here: its local state
            hold = stack_lock(str(stack_or_spec), line, wait=wait, note=note)
        else:
            hold = changing(spec, line, wait=wait, note=note)
        with hold, interruptible():
            yield
    except LockError as exc:
        raise Exit(str(exc), code=EXIT_BUSY) from None
    except StateError as exc:
        raise Exit(f"error: {exc}", code=exc.exit_code) from None


@contextmanager
def state_read(spec: ClusterSpec) -> Iterator[None]:
    """Read the stack's state where the spec keeps it (a private copy of a shared backend's)."""
    from clusterforge.state import StateError, reading

    try:
        with reading(spec):
            yield
    except StateError as exc:
        raise Exit(f"error: {exc}", code=exc.exit_code) from None
