"""Checks on node pools, partitions and capacity: does the cluster's shape make sense?"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from clusterforge.spec.checks.base import Check, CheckContext, Issue, error, info, one_of, suggest, warning


class InstanceTypeKnown(Check):
    id = "instance-type-unknown"
    summary = "Every pool's instance type is in the hardware catalogue"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        names = ctx.hardware.names()
        for i, pool in ctx.pools():
            if pool.instance_type not in ctx.hardware:
                yield error(
                    f"node_pools[{i}].instance_type",
                    f"unknown instance type {pool.instance_type!r}{suggest(pool.instance_type, names)}; "
                    f"{one_of(names)} (clusterforge/data/hardware.yaml)",
                )


class InstanceTypeProvider(Check):
    id = "instance-type-provider"
    summary = "Container types only on the local provider, cloud types only on aws (static takes any)"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        if ctx.provider == "static":
            return
        for i, pool, it in ctx.typed_pools():
            if it.provider != ctx.provider:
                valid = ctx.hardware.names(provider=ctx.provider)
                yield error(
                    f"node_pools[{i}].instance_type",
                    f"{pool.instance_type!r} is a {it.provider} type but provider.kind is {ctx.provider!r}; "
                    f"{one_of(valid)}",
                )


class PoolNamesUnique(Check):
    id = "pool-names-unique"
    summary = "Node pool names are unique (they name nodes and Slurm partitions' members)"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        seen: dict[str, int] = {}
        for i, pool in ctx.pools():
            if pool.name in seen:
                yield error(
                    f"node_pools[{i}].name",
                    f"duplicate pool name {pool.name!r} (first used by node_pools[{seen[pool.name]}]); "
                    "pool names name the nodes, so they must be unique",
                )
            else:
                seen[pool.name] = i


class HeadPool(Check):
    id = "head-pool"
    summary = "Exactly one head pool with exactly one node (the Slurm controller)"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        heads = [(i, p) for i, p in ctx.pools() if p.role == "head"]
        if not heads:
            yield error("node_pools", "no pool with role 'head': the Slurm controller needs one (count: 1)")
            return
        for i, pool in heads[1:]:
            yield error(
                f"node_pools[{i}].role",
                f"pool {pool.name!r} is a second head pool (first: {heads[0][1].name!r}); one head pool only",
            )
        i, pool = heads[0]
        if pool.count != 1:
            yield error(
                f"node_pools[{i}].count", f"head pool {pool.name!r} has count {pool.count}; it must be 1"
            )


class PoolRoleHardware(Check):
    id = "pool-role-hardware"
    summary = "gpu pools use GPU types (or the local container type); head/login pools should not"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        gpu_types = [n for n in ctx.hardware.names(provider="aws") if ctx.hardware[n].gpu]
        for i, pool, it in ctx.typed_pools():
            if pool.role == "gpu" and it.gpu is None and not it.container:
                yield error(
                    f"node_pools[{i}].instance_type",
                    f"pool {pool.name!r} has role 'gpu' but {pool.instance_type!r} has no GPU; "
                    f"GPU types: {', '.join(gpu_types)}",
                )
            elif pool.role in ("head", "login") and it.gpu is not None:
                yield warning(
                    f"node_pools[{i}].instance_type",
                    f"{pool.role} pool {pool.name!r} uses GPU type {pool.instance_type!r}; its GPUs would sit idle "
                    "(e.g. m7i.xlarge is enough for a head node)",
                )


class GpuPoolPresent(Check):
    id = "gpu-pool-present"
    summary = "The cluster has at least one gpu pool with nodes"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        if not any(p.role == "gpu" and p.count > 0 for p in ctx.spec.node_pools):
            yield warning("node_pools", "no gpu pool with count > 0: the cluster has no workers")


class CapacityReservation(Check):
    id = "capacity-reservation"
    summary = "Reservation vs Capacity Block, count within the reservation's size, cloud only"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        for i, pool in ctx.pools():
            base = f"node_pools[{i}]"
            reserved = pool.capacity_reservation_id or pool.capacity_block_id
            if pool.capacity_reservation_id and pool.capacity_block_id:
                yield error(
                    f"{base}.capacity_block_id",
                    f"pool {pool.name!r} sets both capacity_reservation_id ({pool.capacity_reservation_id}) and "
                    f"capacity_block_id ({pool.capacity_block_id}); an instance launches into one: keep one",
                )
            if reserved and ctx.provider != "aws":
                key = "capacity_reservation_id" if pool.capacity_reservation_id else "capacity_block_id"
                yield error(
                    f"{base}.{key}", f"capacity reservations exist only on aws, not on {ctx.provider!r}"
                )
            size = pool.capacity_reservation_size
            if size is not None and not reserved:
                yield error(
                    f"{base}.capacity_reservation_size",
                    f"capacity_reservation_size {size} without capacity_reservation_id or capacity_block_id",
                )
            if size is not None and pool.count > size:
                yield error(
                    f"{base}.count",
                    f"count {pool.count} is more than the reservation holds (capacity_reservation_size {size}); "
                    f"lower count to <= {size} or grow the reservation",
                )
            if pool.capacity_block_id and size is None:
                yield warning(
                    f"{base}.capacity_block_id",
                    "capacity_block_id without capacity_reservation_size: count cannot be checked before launch",
                )


class EfaPlacementGroup(Check):
    """EFA pools want a cluster placement group, except in a Capacity Block: AWS places a
    block's instances together itself ("Capacity Blocks for ML", EC2 user guide), and a group
    on top only adds placement constraints. A targeted reservation not made in the pool's group
    has the same problem: ParallelCluster's PlacementGroupCapacityReservationValidator warns
    "insufficient capacity errors may occur due to placement constraints outside of the
    reservation". A group the stack creates cannot be the one a reservation was made in, so
    the fix is to name the reservation's group (placement_group.name)."""

    id = "efa-placement-group"
    summary = (
        "EFA pools sit in a cluster placement group (none in a Capacity Block; a reservation's own group)"
    )

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        if ctx.provider != "aws":
            return
        for i, pool, it in ctx.typed_pools():
            if not it.has_efa or pool.role != "gpu":
                continue
            pg = pool.placement_group
            if pool.capacity_block_id:
                if pg is not None:
                    yield warning(
                        f"node_pools[{i}].placement_group",
                        f"pool {pool.name!r} is in Capacity Block {pool.capacity_block_id}, whose instances AWS "
                        "already places together; a placement group only risks insufficient-capacity launches: "
                        "drop placement_group",
                    )
                continue
            if pool.capacity_reservation_id and pg is not None and pg.name is None:
                yield warning(
                    f"node_pools[{i}].placement_group",
                    f"the stack creates placement group '{ctx.spec.stack}-{pool.name}', so reservation "
                    f"{pool.capacity_reservation_id} cannot have been made in it, and launches may fail for "
                    "placement outside the reservation: set placement_group.name to the group the reservation "
                    "was created in (`invoke aws.preflight` shows it), or drop placement_group",
                )
            if pg is None:
                yield error(
                    f"node_pools[{i}]",
                    f"pool {pool.name!r} uses EFA type {pool.instance_type!r} ({it.network.efa_interfaces} EFA "
                    "interfaces) without a placement_group; add placement_group: {strategy: cluster}",
                )
            elif pg.strategy != "cluster":
                yield warning(
                    f"node_pools[{i}].placement_group.strategy",
                    f"strategy {pg.strategy!r}: EFA collectives want 'cluster' (lowest latency)",
                )


class RootVolumeIops(Check):
    """io1 and io2 volumes have no default IOPS: CreateVolume/RunInstances refuse them without
    one (EC2 API reference, EbsBlockDevice.Iops: "required for io1 and io2 volumes")."""

    id = "root-volume-iops"
    summary = "io1/io2 root volumes name their iops; throughput only on gp3"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        for i, pool in ctx.pools():
            volume = pool.root_volume
            path = f"node_pools[{i}].root_volume"
            if volume.type in ("io1", "io2") and volume.iops is None:
                yield error(
                    f"{path}.type",
                    f"root volume type {volume.type!r} of pool {pool.name!r} needs iops (AWS has no default "
                    "for provisioned-IOPS volumes); add e.g. iops: 16000",
                )
            if volume.throughput_mibps is not None and volume.type != "gp3":
                yield error(
                    f"{path}.throughput_mibps",
                    f"throughput_mibps applies to gp3 only, not {volume.type!r}; drop it or use type: gp3",
                )


class PlacementGroupSettings(Check):
    id = "placement-group-settings"
    summary = "partition_count only with strategy partition; placement groups only on aws"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        for i, pool in ctx.pools():
            pg = pool.placement_group
            if pg is None:
                continue
            path = f"node_pools[{i}].placement_group"
            if ctx.provider != "aws":
                yield warning(path, f"placement groups exist only on aws; ignored on {ctx.provider!r}")
            if pg.partition_count is not None and pg.strategy != "partition":
                yield error(
                    f"{path}.partition_count",
                    f"partition_count {pg.partition_count} needs strategy 'partition' (got {pg.strategy!r})",
                )


class Partitions(Check):
    id = "partitions"
    summary = "Partitions name existing pools, names are unique, one default at most"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        pools = {p.name: p for p in ctx.spec.node_pools}
        parts = ctx.spec.orchestration.partitions
        counts = Counter(p.name for p in parts)
        for j, part in enumerate(parts):
            base = f"orchestration.partitions[{j}]"
            if counts[part.name] > 1:
                yield error(f"{base}.name", f"duplicate partition name {part.name!r}")
            for k, name in enumerate(part.pools):
                pool = pools.get(name)
                if pool is None:
                    yield error(
                        f"{base}.pools[{k}]",
                        f"partition {part.name!r} names unknown pool {name!r}{suggest(name, pools)}; "
                        f"{one_of(pools)}",
                    )
                elif pool.role == "head":
                    yield warning(
                        f"{base}.pools[{k}]",
                        f"partition {part.name!r} includes head pool {name!r}: jobs would run on the controller",
                    )
        defaults = [j for j, part in enumerate(parts) if part.default]
        for j in defaults[1:]:
            yield error(
                f"orchestration.partitions[{j}].default",
                f"more than one default partition ({', '.join(parts[d].name for d in defaults)}); keep one",
            )
        if not defaults:
            yield info(
                "orchestration.partitions", f"no default partition: Slurm uses the first, {parts[0].name!r}"
            )
        in_partition = {name for part in parts for name in part.pools}
        for i, pool in ctx.pools():
            if pool.role == "gpu" and pool.name not in in_partition:
                yield warning(
                    f"node_pools[{i}].name", f"gpu pool {pool.name!r} is in no partition: no job can reach it"
                )
