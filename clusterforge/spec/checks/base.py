"""What a spec check is: a small class with a stable id that yields issues about one concern.

Checks never raise for a bad spec; they yield ``Issue``s. The runner turns each into a
``Finding`` with the file and line of its key path, and turns an exception inside a check into
an error finding (aws-parallelcluster's validators do the same), so one broken check never
hides the others' results.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar, Literal

from clusterforge.catalog import CompatMatrix, HardwareCatalog, InstanceType
from clusterforge.spec.loader import LineMap
from clusterforge.spec.models import ClusterSpec, NodePool

Level = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class Issue:
    level: Level
    path: str
    message: str


def error(path: str, message: str) -> Issue:
    return Issue("error", path, message)


def warning(path: str, message: str) -> Issue:
    return Issue("warning", path, message)


def info(path: str, message: str) -> Issue:
    return Issue("info", path, message)


def suggest(value: object, choices: Iterable[str]) -> str:
    """`` (did you mean 'p5.48xlarge'?)`` or an empty string."""
    match = difflib.get_close_matches(str(value), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def one_of(choices: Iterable[str], limit: int = 12) -> str:
    items = list(choices)
    shown = ", ".join(items[:limit]) + (", ..." if len(items) > limit else "")
    return f"valid: {shown}"


@dataclass(frozen=True)
class CheckContext:
    """Everything a check may read: the spec and both catalogues (no network, ever)."""

    spec: ClusterSpec
    hardware: HardwareCatalog
    compat: CompatMatrix
    lines: LineMap

    @property
    def provider(self) -> str:
        return self.spec.provider.kind

    def pools(self) -> Iterator[tuple[int, NodePool]]:
        yield from enumerate(self.spec.node_pools)

    def typed_pools(self) -> Iterator[tuple[int, NodePool, InstanceType]]:
        """Pools whose instance type is in the catalogue (unknown ones are another check's error)."""
        for i, pool in enumerate(self.spec.node_pools):
            it = self.hardware.get(pool.instance_type)
            if it is not None:
                yield i, pool, it

    def gpu_pools(self) -> Iterator[tuple[int, NodePool, InstanceType]]:
        """Pools whose instance type has NVIDIA GPUs."""
        for i, pool, it in self.typed_pools():
            if it.gpu is not None:
                yield i, pool, it


class Check:
    """One concern. Subclasses set ``id`` (kebab-case, stable: users suppress by it) and
    ``summary`` (one line, shown by ``invoke spec.checks``), and implement ``run``."""

    id: ClassVar[str]
    summary: ClassVar[str]

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        raise NotImplementedError
