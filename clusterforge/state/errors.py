"""Errors of the state layer; each message names the backend or object and what to do."""

from __future__ import annotations

from clusterforge.state.backend import BackendError, PreconditionFailed, Unreachable

__all__ = ["BackendError", "ForeignState", "PreconditionFailed", "StateConflict", "StateError", "Unreachable"]


class StateError(Exception):
    """The stack's state cannot be read or written as asked."""

    exit_code = 1


class StateConflict(StateError):
    """Another writer changed the state since it was read, or it holds another history: refused."""

    exit_code = 2


class ForeignState(StateError):
    """A state object that is not clusterforge's state of this stack (or is corrupt): refused."""

    exit_code = 2
