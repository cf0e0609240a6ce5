"""Security floors: the lowest release of a component that carries an NVIDIA security bulletin's fixes.

Data lives in ``compatibility.yaml`` under ``security_floors`` (each bulletin with its id, title,
date and CVEs); this module gives it types and the one look-up the spec check and the plan share:
which floors a pinned version is below. A later bulletin's floor supersedes an earlier one, so the
fix a user is told is the highest floor not met.
"""

from __future__ import annotations

import datetime
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clusterforge.catalog.versions import vcmp, vtuple

FloorComponent = Literal["driver", "dcgm", "nvidia_container_toolkit"]
BULLETIN_URL = "https://nvidia.custhelp.com/app/answers/detail/a_id/{id}"


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("branch", "fixed", "bulletin", mode="before", check_fields=False)
    @classmethod
    def _text(cls, value: object) -> object:
        # YAML reads 535 as a number; versions and ids are text.
        if isinstance(value, float):
            raise ValueError(f"write {value!r} as a quoted string (YAML read it as a number)")
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class Bulletin(_Data):
    title: str
    published: datetime.date
    cves: list[str] = Field(min_length=1)


class Floor(_Data):
    component: FloorComponent
    fixed: str = Field(description="First release with the bulletin's fixes")
    bulletin: str
    branch: str | None = Field(None, description="driver only: the branch this row is for")

    @model_validator(mode="after")
    def _shape(self) -> Floor:
        vtuple(self.fixed)  # a dotted version, or ValueError
        if (self.component == "driver") != (self.branch is not None):
            raise ValueError(f"{self.component} {self.fixed}: a driver floor needs a branch, others none")
        if self.branch is not None and self.fixed.split(".")[0] != self.branch:
            raise ValueError(f"driver floor {self.fixed} is not on branch {self.branch}")
        return self


class Unmet(NamedTuple):
    """One floor a version is below, with its bulletin."""

    floor: Floor
    bulletin: Bulletin

    @property
    def url(self) -> str:
        return BULLETIN_URL.format(id=self.floor.bulletin)

    def advisory(self) -> str:
        """``NVIDIA bulletin 5747 (GPU Display Driver - January 2026, 2026-01-28: CVE-..., CVE-...)``."""
        b = self.bulletin
        return f"NVIDIA bulletin {self.floor.bulletin} ({b.title}, {b.published}: {', '.join(b.cves)})"


class SecurityFloors(_Data):
    as_of: str = Field(pattern=r"^\d{4}-\d{2}$", description="When the bulletins were last read (YYYY-MM)")
    bulletins: dict[str, Bulletin]
    floors: list[Floor]

    @model_validator(mode="after")
    def _bulletins_declared(self) -> SecurityFloors:
        for floor in self.floors:
            if floor.bulletin not in self.bulletins:
                raise ValueError(
                    f"floor {floor.component} {floor.fixed}: bulletin {floor.bulletin!r} not listed"
                )
        return self

    def unmet(self, component: FloorComponent, version: str, branch: str | None = None) -> list[Unmet]:
        """Every floor of ``component`` (on ``branch`` for the driver) that ``version`` is below,
        highest first; empty when the version meets them all or no bulletin covers it."""
        out = [
            Unmet(f, self.bulletins[f.bulletin])
            for f in self.floors
            if f.component == component and f.branch == branch and vcmp(version, f.fixed) < 0
        ]
        return sorted(out, key=lambda u: vtuple(u.floor.fixed), reverse=True)
