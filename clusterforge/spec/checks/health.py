"""Checks on the health loop's settings and on the software set against version floors (NVIDIA's security
bulletins, known defects)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from clusterforge.catalog.floors import FloorComponent, SecurityFloors, Unmet
from clusterforge.spec.checks.base import Check, CheckContext, Issue, error, info, one_of, suggest, warning
from clusterforge.spec.models import ClusterSpec


def pinned_below_floors(
    spec: ClusterSpec, floors: SecurityFloors
) -> Iterator[tuple[str, FloorComponent, str, list[Unmet]]]:
    """(key path, component, pinned version, unmet floors highest first) for each pinned component
    below at least one floor; shared with ``invoke plan``."""
    sw = spec.software
    pinned: list[tuple[str, FloorComponent, str | None, str | None]] = [
        ("software.driver.version", "driver", sw.driver.version, sw.driver.branch),
        ("software.dcgm", "dcgm", sw.dcgm, None),
        ("software.nvidia_container_toolkit", "nvidia_container_toolkit", sw.nvidia_container_toolkit, None),
        ("software.cuda", "cuda", sw.cuda, None),
        ("software.nccl", "nccl", sw.nccl, None),
    ]
    for path, component, version, branch in pinned:
        if version is None:
            continue
        unmet = floors.unmet(component, version, branch)
        if unmet:
            yield path, component, version, unmet


def floor_message(component: str, version: str, unmet: list[Unmet]) -> str:
    """One sentence: what is below which floor, the newest advisory or defect, the others unmet, and the fix."""
    top = unmet[0]
    rest = unmet[1:]
    if rest and all(u.security for u in rest):
        also = "; also below bulletins " + ", ".join(f"{u.floor.bulletin} ({u.floor.fixed})" for u in rest)
    else:
        also = "".join(f"; also below {u.label()} ({u.floor.fixed})" for u in rest)
    what = (
        f"is below NVIDIA's security floor {top.floor.fixed}"
        if top.security
        else f"has a known defect fixed in {top.floor.fixed}"
    )
    return (
        f"{component} {version} {what}: {top.advisory()}{also}; "
        f"fix: pin {component} {top.floor.fixed} or later ({top.url})"
    )


class SecurityFloor(Check):
    id = "security-floor"
    summary = (
        "Driver, DCGM, container toolkit, CUDA and NCCL are at least the fixed release of every NVIDIA "
        "security bulletin and known defect catalogued"
    )

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        has_gpus = any(True for _ in ctx.gpu_pools())
        for path, component, version, unmet in pinned_below_floors(ctx.spec, ctx.compat.security_floors):
            text = floor_message(component, version, unmet)
            if ctx.spec.health.floors == "error":
                yield error(path, text)
            elif has_gpus:
                yield warning(path, text)
            else:
                # No GPU pool: the component is pinned but runs on no GPU node (the local stack).
                yield info(path, text)


class HealthPolicy(Check):
    id = "health-policy"
    summary = "health: pools named exist; the active-check profile is a certification profile"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        health = ctx.spec.health
        names = [p.name for p in ctx.spec.node_pools]
        for pool in health.pools:
            if pool not in names:
                yield error(
                    f"health.pools.{pool}",
                    f"health.pools: no node pool {pool!r}{suggest(pool, names)}; {one_of(names)}",
                )
        profile = health.active.profile
        profiles = list(ctx.spec.certification.profiles)
        if profile is not None and profile not in profiles:
            yield error(
                "health.active.profile",
                f"health.active.profile {profile!r} is not a certification profile{suggest(profile, profiles)}; "
                f"{one_of(profiles) if profiles else 'define one under certification.profiles'}",
            )
