"""The spec's ``health`` section: version floors, strikes and lemons, active checks, remediation.

Kept apart from ``models.py`` (which holds one field for it) so the health loop's settings read as
one block. Strict like every spec model: an unknown key is an error.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_DURATION = r"^[1-9]\d*[smhd]$"
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """``"7d"`` -> 604800. Raises ValueError naming the form on anything else."""
    if not re.fullmatch(_DURATION, text):
        raise ValueError(f"duration {text!r}: give a whole number and a unit s, m, h or d, e.g. 12h or 7d")
    return int(text[:-1]) * _UNIT_SECONDS[text[-1]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Duration = str


class Strikes(_Strict):
    """How many failures in which window make a node a lemon (Azure's health agent counts the same)."""

    count: int = Field(3, ge=1, le=100, description="Failures within the window that make a lemon")
    window: Duration = Field("7d", pattern=_DURATION, description="Sliding window, e.g. 7d or 36h")

    @property
    def window_s(self) -> int:
        return duration_seconds(self.window)


class ActiveChecks(_Strict):
    """Scheduled checks on idle nodes, run by the health loop on the head node (docs/health.md)."""

    profile: str | None = Field(
        None, description="certification profile the scheduled check runs; unset: no scheduled checks"
    )
    every: Duration = Field("12h", pattern=_DURATION, description="How often each node is checked")
    max_nodes: int | str = Field(
        "10%", description="Most nodes checked at once: a count, or a percentage of the cluster's GPU nodes"
    )

    @property
    def every_s(self) -> int:
        return duration_seconds(self.every)

    @field_validator("max_nodes", mode="before")
    @classmethod
    def _count_or_percent(cls, value: object) -> object:
        ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 1) or (
            isinstance(value, str) and bool(re.fullmatch(r"([1-9]\d?|100)%", value))
        )
        if not ok:
            raise ValueError(
                f"max_nodes {value!r}: give a count of at least 1 or a percentage from 1% to 100%"
            )
        return value

    def limit(self, nodes: int) -> int:
        """The count for a cluster of ``nodes`` (a percentage rounds down, at least 1)."""
        if isinstance(self.max_nodes, int):
            return self.max_nodes
        return max(1, nodes * int(self.max_nodes[:-1]) // 100)


class Remediation(_Strict):
    """What happens to a failing node: drain, re-certify, return only on a pass; a lemon is replaced
    or flagged for RMA only as this says."""

    recertify_suite: Literal["quick", "standard", "full"] = Field(
        "full", description="validators suite a drained node must pass before it returns to service"
    )
    on_lemon: Literal["flag", "replace"] = Field(
        "flag",
        description="flag: keep the lemon drained and flag it for RMA (nothing is replaced); replace: "
        "`invoke replace` it where the provider can, else flag",
    )
    recertify_retry: Duration = Field(
        "1h",
        pattern=_DURATION,
        description="A failed re-certification is tried again after this (each failure is a strike)",
    )

    @property
    def recertify_retry_s(self) -> int:
        return duration_seconds(self.recertify_retry)


class Health(_Strict):
    """The health loop's policy."""

    floors: Literal["warn", "error"] = Field(
        "warn",
        description="A pinned version below an NVIDIA security bulletin's floor: warn, or fail spec.check",
    )
    strikes: Strikes = Strikes()
    active: ActiveChecks = ActiveChecks()
    remediation: Remediation = Remediation()
    pools: dict[str, Remediation] = Field(
        default_factory=dict, description="Per-pool remediation overriding `remediation`, by pool name"
    )

    def remediation_for(self, pool: str) -> Remediation:
        return self.pools.get(pool, self.remediation)
