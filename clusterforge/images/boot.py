"""What pools with ``image: baked`` boot, and what their nodes must find in it.

- ``base_image(spec)``: the image a bake starts from (local: the node image tag, built from the
  machine's Debian mirror; aws: the spec's AMI, else the OS image's public parameter).
- ``expected_digests(spec)``: pool -> the software digest the spec asks for now; the inventory
  renders it per node (``node_image_software_digest``), and role node_image skips the node
  software where the image's own record names it and its items are unchanged.
- ``boot_images(spec)``: pool -> the baked image to boot (the provider), or a clear error.
- ``stale_images(spec)``: pool -> why its baked image no longer fits the spec (`invoke plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from clusterforge.images.digest import SoftwareDigest, software_digest, stale_reasons
from clusterforge.images.record import ImageRecord, load_records
from clusterforge.spec.loader import REPO_ROOT
from clusterforge.spec.models import ClusterSpec


class BakeNeeded(Exception):
    """A pool asks for a baked image that does not exist; the message says what to run."""


def baked_pools(spec: ClusterSpec) -> list[str]:
    return [p.name for p in spec.node_pools if p.image == "baked" and p.role == "gpu"]


def base_image(spec: ClusterSpec, engine_name: str | None = None) -> str:
    """The base a pool's image is baked on: a new base is a new image."""
    if spec.provider.kind == "local":
        from clusterforge.providers.local import image as image_mod
        from clusterforge.providers.local.engine import detect_engine

        name = engine_name or detect_engine(spec.provider.engine).name
        suite = spec.provider.debian_suite
        return image_mod.image_tag(name, suite, image_mod.machine_mirrors(suite))
    ami = getattr(spec.provider, "ami", None)
    return str(ami) if ami else f"os-image:{spec.software.os_image}"


def expected(spec: ClusterSpec, root: Path = REPO_ROOT, base: str | None = None) -> dict[str, SoftwareDigest]:
    """pool -> the software digest of each pool that boots a baked image (none: {})."""
    pools = baked_pools(spec)
    if not pools:
        return {}
    base = base or base_image(spec)
    return {pool: software_digest(spec, pool, base, root) for pool in pools}


def expected_digests(spec: ClusterSpec, root: Path = REPO_ROOT, base: str | None = None) -> dict[str, str]:
    return {pool: d.digest for pool, d in expected(spec, root, base).items()}


def boot_images(spec: ClusterSpec, records: Mapping[str, ImageRecord] | None = None) -> dict[str, str]:
    """pool -> the image its nodes boot, for the pools that ask for a baked one."""
    pools = baked_pools(spec)
    if not pools:
        return {}
    records = load_records(spec.stack) if records is None else records
    out = {}
    for pool in pools:
        rec = records.get(pool)
        if rec is None:
            raise BakeNeeded(
                f"node_pools[{pool}].image: baked, but no image was baked for stack {spec.stack!r}: run "
                f"`invoke image.bake --stack {spec.stack}` first (or set image: base)"
            )
        if rec.provider != spec.provider.kind:
            raise BakeNeeded(
                f"node_pools[{pool}].image: baked, but its recorded image {rec.image} is a {rec.provider} "
                f"image and the stack's provider is {spec.provider.kind}: run `invoke image.bake --stack {spec.stack}`"
            )
        out[pool] = rec.image
    return out


def stale_images(
    spec: ClusterSpec,
    records: Mapping[str, ImageRecord] | None = None,
    root: Path = REPO_ROOT,
    base: str | None = None,
) -> dict[str, list[str]]:
    """pool -> why its baked image does not fit the spec now (missing, or the digest moved)."""
    pools = baked_pools(spec)
    if not pools:
        return {}
    records = load_records(spec.stack) if records is None else records
    now = expected(spec, root, base)
    out: dict[str, list[str]] = {}
    for pool in pools:
        rec = records.get(pool)
        if rec is None:
            out[pool] = ["no image baked yet"]
            continue
        reasons = stale_reasons(rec.software, now[pool])
        if reasons:
            out[pool] = reasons
    return out


def stale_notes(
    spec: ClusterSpec, stale: Mapping[str, list[str]], records: Mapping[str, ImageRecord]
) -> list[str]:
    """One line per stale pool, for `plan` and `up`."""
    out = []
    for pool, reasons in sorted(stale.items()):
        rec = records.get(pool)
        if rec is None:
            out.append(
                f"pool {pool}: image: baked, but no image was baked yet: run `invoke image.bake --stack "
                f"{spec.stack}` before `invoke up` (which refuses until then)"
            )
            continue
        out.append(
            f"pool {pool}: baked image {rec.image} (digest {rec.digest}) is stale for the spec: "
            f"{'; '.join(reasons)}; its nodes converge the node software in full until "
            f"`invoke image.bake --stack {spec.stack}` is run"
        )
    return out


def boot_digests(spec: ClusterSpec, note: Callable[[str, str], None]) -> dict[str, str]:
    """pool -> the software digest its nodes' baked image must hold to skip the node software (pools
    with ``image: baked``), for the inventory; says once (``note("image", ...)``) when a pool's
    image is stale: its nodes then converge in full."""
    if not baked_pools(spec):
        return {}
    records = load_records(spec.stack)
    now = expected(spec)
    for pool, digest in sorted(now.items()):
        rec = records.get(pool)
        if rec is not None and rec.digest != digest.digest:
            note("image", stale_notes(spec, {pool: stale_reasons(rec.software, digest)}, records)[0])
    return {pool: d.digest for pool, d in now.items()}
