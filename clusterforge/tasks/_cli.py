"""What every task shares: errors as one readable line, tracebacks only when debugging."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from invoke.exceptions import Exit, Failure, UnexpectedExit

from clusterforge.spec.loader import SpecError

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

    return wrapper  # type: ignore[return-value]


EXIT_BUSY = 2  # the stack's lock is held by another command (or its lock file is unusable)


@contextmanager
def locked(stack: str, command: str, wait: bool = False) -> Iterator[None]:
    """Hold the stack's lock (clusterforge/lock.py) around a task that changes the stack.

    Held by another command: exit 2 at once naming the holder (or wait, with ``--wait``). The
    command line is recorded so that a refused command can say exactly what runs."""
    from clusterforge.lock import LockError, stack_lock

    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    line = " ".join(["invoke", *sys.argv[1:]]) if argv0 in ("invoke", "inv") else f"invoke {command}"
    try:
        with stack_lock(stack, line, wait=wait, note=lambda text: print(text, file=sys.stderr, flush=True)):
            yield
    except LockError as exc:
        raise Exit(str(exc), code=EXIT_BUSY) from None
