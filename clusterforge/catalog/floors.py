"""Version floors: the lowest release of a component that carries an NVIDIA security bulletin's fixes,
or the fix of a known defect (data corruption, a hang) its maker's release notes name.

Data lives in ``compatibility.yaml`` under ``security_floors``: each bulletin with its id, title,
date and CVEs (NVIDIA PSIRT), each defect with its title, date, what it does and its source (the
release notes that say it was fixed); a floor names one of them. A defect usually has a first
affected release (``since``): a release older than that never had it. This module gives the data
types and the one look-up the spec check and the plan share: which floors a pinned version is
below. A later floor supersedes an earlier one, so the fix a user is told is the highest floor not met.
"""

from __future__ import annotations

import datetime
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clusterforge.catalog.versions import vcmp, vtuple

FloorComponent = Literal["driver", "dcgm", "nvidia_container_toolkit", "cuda", "nccl"]
BULLETIN_URL = "https://nvidia.custhelp.com/app/answers/detail/a_id/{id}"


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("branch", "fixed", "since", "bulletin", mode="before", check_fields=False)
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
    affects: str | None = Field(
        None, description="The parts of the component the CVEs are in, e.g. cuobjdump"
    )


class Defect(_Data):
    """A known defect of a release, from its maker's release notes or issue tracker (not a CVE)."""

    title: str
    published: datetime.date = Field(description="Date of the release that fixed it")
    what: str = Field(description="What it does, in the source's words where short")
    source: str = Field(pattern=r"^https://", description="Release notes or issue that say it was fixed")


class Floor(_Data):
    component: FloorComponent
    fixed: str = Field(description="First release with the fix")
    bulletin: str | None = Field(None, description="The NVIDIA security bulletin's id (a_id)")
    defect: str | None = Field(None, description="Key of a known defect under `defects`")
    since: str | None = Field(None, description="First affected release; unset: every earlier release")
    branch: str | None = Field(None, description="driver only: the branch this row is for")

    @model_validator(mode="after")
    def _shape(self) -> Floor:
        vtuple(self.fixed)  # a dotted version, or ValueError
        if (self.bulletin is None) == (self.defect is None):
            raise ValueError(f"{self.component} {self.fixed}: name a bulletin or a defect (one of them)")
        if (self.component == "driver") != (self.branch is not None):
            raise ValueError(f"{self.component} {self.fixed}: a driver floor needs a branch, others none")
        if self.branch is not None and self.fixed.split(".")[0] != self.branch:
            raise ValueError(f"driver floor {self.fixed} is not on branch {self.branch}")
        if self.since is not None and vcmp(self.since, self.fixed) >= 0:
            raise ValueError(f"{self.component} {self.fixed}: since {self.since} is not before the fix")
        return self


class Unmet(NamedTuple):
    """One floor a version is below, with its bulletin or known defect."""

    floor: Floor
    source: Bulletin | Defect

    @property
    def url(self) -> str:
        if isinstance(self.source, Defect):
            return self.source.source
        return BULLETIN_URL.format(id=self.floor.bulletin)

    @property
    def security(self) -> bool:
        return isinstance(self.source, Bulletin)

    def label(self) -> str:
        """``NVIDIA bulletin 5747`` or ``known defect nccl-2.18-tree-ll128``."""
        return (
            f"NVIDIA bulletin {self.floor.bulletin}" if self.security else f"known defect {self.floor.defect}"
        )

    def advisory(self) -> str:
        """``NVIDIA bulletin 5747 (GPU Display Driver - January 2026, 2026-01-28: CVE-..., CVE-...)``;
        ``known defect K (TITLE, fixed DATE: WHAT)``."""
        s = self.source
        if isinstance(s, Defect):
            return f"{self.label()} ({s.title}, fixed {s.published}: {s.what})"
        where = f" in {s.affects}" if s.affects else ""
        return f"{self.label()} ({s.title}, {s.published}: {', '.join(s.cves)}{where})"


class SecurityFloors(_Data):
    as_of: str = Field(pattern=r"^\d{4}-\d{2}$", description="When the sources were last read (YYYY-MM)")
    bulletins: dict[str, Bulletin]
    defects: dict[str, Defect] = Field(default_factory=dict)
    floors: list[Floor]

    @model_validator(mode="after")
    def _sources_declared(self) -> SecurityFloors:
        for floor in self.floors:
            if floor.bulletin is not None and floor.bulletin not in self.bulletins:
                raise ValueError(
                    f"floor {floor.component} {floor.fixed}: bulletin {floor.bulletin!r} not listed"
                )
            if floor.defect is not None and floor.defect not in self.defects:
                raise ValueError(f"floor {floor.component} {floor.fixed}: defect {floor.defect!r} not listed")
        return self

    def unmet(self, component: FloorComponent, version: str, branch: str | None = None) -> list[Unmet]:
        """Every floor of ``component`` (on ``branch`` for the driver) that ``version`` is below and,
        for a defect with a first affected release, at or above that; highest first; empty when the
        version meets them all or nothing covers it."""
        out = [
            Unmet(f, self.bulletins[f.bulletin] if f.bulletin is not None else self.defects[str(f.defect)])
            for f in self.floors
            if f.component == component
            and f.branch == branch
            and vcmp(version, f.fixed) < 0
            and (f.since is None or vcmp(version, f.since) >= 0)
        ]
        return sorted(out, key=lambda u: vtuple(u.floor.fixed), reverse=True)
