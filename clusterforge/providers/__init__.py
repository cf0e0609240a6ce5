"""Providers turn node pools into reachable nodes (see ``base.Provider``).

Each provider lives in ``clusterforge.providers.<kind>`` and exposes ``make_provider(spec)``;
imports are lazy so that, e.g., the local provider never imports boto3 or pulumi.
"""

from __future__ import annotations

import importlib

from clusterforge.providers.base import (
    DestroySummary,
    Node,
    PlannedNode,
    Problem,
    Progress,
    Provider,
    ProviderError,
    no_progress,
)
from clusterforge.spec.models import ClusterSpec

__all__ = [
    "DestroySummary",
    "Node",
    "PlannedNode",
    "Problem",
    "Progress",
    "Provider",
    "ProviderError",
    "get_provider",
    "no_progress",
]


def get_provider(spec: ClusterSpec) -> Provider:
    """The provider for ``spec.provider.kind``."""
    kind = spec.provider.kind
    try:
        module = importlib.import_module(f"clusterforge.providers.{kind}")
    except ModuleNotFoundError as exc:
        if exc.name != f"clusterforge.providers.{kind}":
            raise
        raise ProviderError(
            f"provider.kind: {kind!r}: no provider module clusterforge.providers.{kind}"
        ) from exc
    return module.make_provider(spec)
