"""What every task shares: errors as one readable line, tracebacks only when debugging."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
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
