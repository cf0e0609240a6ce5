"""What every provider returns and offers: the node list shape and the ``Provider`` protocol.

A provider turns the spec's node pools into reachable nodes. The pipeline only talks to this
protocol, so the local containers, AWS and static machines look the same downstream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from clusterforge.spec.models import ClusterSpec


@dataclass(frozen=True)
class Node:
    name: str  # stable, e.g. "node-001", "head-001"
    address: str  # IP reachable from the other nodes
    pool: str
    role: str  # "gpu" | "head" | "login"
    instance_type: str
    connection: dict[str, str]  # ansible connection vars
    provider_id: str = ""  # container id / EC2 instance id
    state: str = "running"  # provider state


@dataclass(frozen=True)
class PlannedNode:
    """One node of the spec and what ``create`` would do with it."""

    name: str
    pool: str
    role: str
    instance_type: str
    action: Literal["create", "start", "keep"]


@dataclass(frozen=True)
class Problem:
    """A preflight finding: found before anything is created, with the fix in the message."""

    level: Literal["error", "warning"]
    check_id: str  # stable kebab-case id, e.g. "engine-missing"
    message: str

    def render(self) -> str:
        return f"{self.level}: {self.message} [{self.check_id}]"


@dataclass
class DestroySummary:
    """What ``destroy`` removed. The local provider fills containers/networks/volumes; a provider
    with other kinds of things (EC2 instances, VPCs, file systems) puts them in ``other`` by kind."""

    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    other: dict[str, list[str]] = field(default_factory=dict)  # kind (singular) -> names

    def removed(self) -> dict[str, list[str]]:
        """Every kind with what was removed of it, e.g. {"container": [...], "instance": [...]}."""
        kinds = {"container": self.containers, "network": self.networks, "volume": self.volumes, **self.other}
        return {kind: names for kind, names in kinds.items() if names}

    @property
    def empty(self) -> bool:
        return not self.removed()

    def render(self) -> str:
        """One line for people: "removed 2 containers, 1 network, 1 volume" or "nothing to remove"."""
        parts = [
            f"{len(names)} {kind}{'' if len(names) == 1 else 's'}" for kind, names in self.removed().items()
        ]
        return "removed " + ", ".join(parts) if parts else "nothing to remove"


# progress(node_name, message): one line per step, for live per-node display.
Progress = Callable[[str, str], None]


def no_progress(node: str, message: str) -> None:
    """Default progress sink: say nothing."""


class ProviderError(Exception):
    """A provider could not do what was asked; the message says what to change."""


@runtime_checkable
class Provider(Protocol):
    def preflight(self, spec: ClusterSpec) -> list[Problem]:
        """Everything that would stop ``create``, found before anything is created."""
        ...

    def plan(self, spec: ClusterSpec) -> list[PlannedNode]:
        """What ``create`` would do, node by node; changes nothing."""
        ...

    def create(self, spec: ClusterSpec, progress: Progress = no_progress) -> list[Node]:
        """Bring every node of the spec up; idempotent (existing nodes are kept)."""
        ...

    def nodes(self, spec: ClusterSpec) -> list[Node]:
        """The stack's nodes as they exist now (any state), in spec order."""
        ...

    def destroy(self, spec: ClusterSpec) -> DestroySummary:
        """Remove exactly what this stack created, nothing else."""
        ...
