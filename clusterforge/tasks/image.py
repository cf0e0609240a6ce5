"""image.bake, image.show: node images that boot ready (clusterforge/images/)."""

from __future__ import annotations

import json as jsonlib
from typing import TYPE_CHECKING

from invoke import Context, task
from invoke.exceptions import Exit

from clusterforge.tasks._cli import friendly, locked
from clusterforge.tasks.cluster import _HELP_SPEC, _HELP_STACK, _HELP_WAIT, load

if TYPE_CHECKING:
    from clusterforge.images.bake import Builder
    from clusterforge.spec.models import ClusterSpec


@task(
    help={
        "stack": _HELP_STACK,
        "spec": _HELP_SPEC,
        "pool": "bake only this compute pool (default: every pool with image: baked, else every compute pool)",
        "force": "bake even where an image for the same software digest exists",
        "wait": _HELP_WAIT,
    }
)
@friendly
def bake(
    c: Context, stack: str = "", spec: str = "", pool: str = "", force: bool = False, wait: bool = False
) -> None:
    """Build each compute pool's node image once: one builder converges playbooks/node_software.yml
    (NVIDIA stack, EFA, Slurm packages, validators runtime), passes the pool's single-node checks and
    is registered as an image (local: a container image; aws: an AMI), recorded with its software
    digest in .clusterforge/<stack>/images.json. Pools with `image: baked` boot it and run only the
    cluster part at boot. Exit 0 baked (or already baked), 1 a bake failed."""
    from clusterforge.images.bake import BakeError, bake_pool
    from clusterforge.images.boot import baked_pools
    from clusterforge.journal import stack_dir
    from clusterforge.pipeline.context import stack_env

    cluster = load(stack, spec)
    compute = [p.name for p in cluster.node_pools if p.role == "gpu"]
    if pool and pool not in compute:
        raise Exit(
            f"--pool {pool}: not a compute pool of stack {cluster.stack} ({', '.join(compute)})", code=2
        )
    pools = [pool] if pool else (baked_pools(cluster) or compute)
    builder = _builder(cluster)
    env = stack_env(cluster, stack_dir(cluster.stack))
    with locked(cluster.stack, "image.bake", wait):
        for name in pools:
            try:
                record = bake_pool(
                    cluster, name, builder, env, progress=lambda line: print(line, flush=True), force=force
                )
            except BakeError as exc:
                raise Exit(f"image.bake: {exc}", code=1) from None
            print(f"{name}: {record.image} digest {record.digest} ({record.checks or 'reused'})")


@task(help={"stack": _HELP_STACK, "spec": _HELP_SPEC, "json": "print JSON"})
@friendly
def show(c: Context, stack: str = "", spec: str = "", json: bool = False) -> None:
    """The baked images of a stack, and whether each still fits the spec (exit 1 when one is stale)."""
    from clusterforge.images.boot import base_image, expected
    from clusterforge.images.digest import stale_reasons
    from clusterforge.images.record import load_records

    cluster = load(stack, spec)
    records = load_records(cluster.stack)
    base = base_image(cluster)
    now = expected(cluster, base=base)
    rows = []
    for name, rec in sorted(records.items()):
        current = now.get(name)
        reasons = stale_reasons(rec.software, current) if current else []
        rows.append({**rec.to_dict(), "used": current is not None, "stale": reasons})
    if json:
        print(jsonlib.dumps(rows, indent=2))
    else:
        for row in rows:
            state = ("STALE: " + "; ".join(row["stale"])) if row["stale"] else "fits the spec"
            use = "" if row["used"] else " (pool does not use image: baked)"
            print(f"{row['pool']}: {row['image']} digest {row['digest']} built {row['built']}: {state}{use}")
        if not rows:
            print(f"stack {cluster.stack}: no baked image (invoke image.bake --stack {cluster.stack})")
    if any(r["stale"] and r["used"] for r in rows):
        raise Exit(code=1)


def _builder(cluster: ClusterSpec) -> Builder:
    if cluster.provider.kind == "local":
        from clusterforge.images.local import LocalBuilder

        return LocalBuilder()
    if cluster.provider.kind == "aws":
        from clusterforge.images.aws import aws_builder

        return aws_builder(cluster)
    raise Exit(
        f"image.bake: provider {cluster.provider.kind} has no images to bake (static machines are installed "
        "in place: `invoke up`)",
        code=2,
    )
