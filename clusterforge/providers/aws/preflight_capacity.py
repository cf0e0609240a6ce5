"""Preflight checks on capacity: On-Demand Capacity Reservations and placement groups (Capacity
Blocks for ML: ``preflight_blocks``).

A reservation and a placement group must agree: ParallelCluster's
PlacementGroupCapacityReservationValidator warns that "an open or targeted capacity reservation
with an unrelated placement group" risks insufficient-capacity launches. A group the stack
creates is never the reservation's, so the fix is to name the reservation's own group in
``placement_group.name``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from botocore.exceptions import ClientError

from clusterforge.providers.aws.preflight_base import (
    AwsClients,
    Check,
    Finding,
    aws_provider,
    error_code,
    live_pools,
)
from clusterforge.spec.models import ClusterSpec, NodePool

CAPACITY_BLOCK = "capacity-block"
# Instances that still hold a reservation slot.
HOLDING_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
STACK_TAG = "clusterforge:stack"


def pool_group_name(spec: ClusterSpec, pool: NodePool) -> str | None:
    """The placement group the pool launches into: the named one, or the one the stack creates."""
    if pool.placement_group is None:
        return None
    return pool.placement_group.name or f"{spec.stack}-{pool.name}"


def own_instances_in(aws: AwsClients, spec: ClusterSpec, rid: str) -> int:
    """The stack's own instances that hold a slot in reservation ``rid`` (all pages)."""
    pages = aws.ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": f"tag:{STACK_TAG}", "Values": [spec.stack]},
            {"Name": "instance-state-name", "Values": HOLDING_STATES},
        ]
    )
    return sum(
        1
        for page in pages
        for reservation in page.get("Reservations", [])
        for inst in reservation.get("Instances", [])
        if inst.get("CapacityReservationId") == rid
    )


def reservation(aws: AwsClients, rid: str) -> dict[str, Any] | None:
    try:
        found = aws.ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    except ClientError as exc:
        if "NotFound" in error_code(exc) or "Malformed" in error_code(exc):
            return None
        raise
    return found[0] if found else None


def reservation_mismatch(spec: ClusterSpec, pool: NodePool, res: dict[str, Any]) -> list[str]:
    wrong = []
    if res.get("InstanceType") != pool.instance_type:
        wrong.append(f"instance type {res.get('InstanceType')} (pool: {pool.instance_type})")
    if res.get("AvailabilityZone") != aws_provider(spec).availability_zone:
        wrong.append(
            f"availability zone {res.get('AvailabilityZone')} (spec: {aws_provider(spec).availability_zone})"
        )
    total = res.get("TotalInstanceCount", 0)
    if total < pool.count:
        wrong.append(f"{total} instances (pool count: {pool.count})")
    return wrong


class CapacityReservation(Check):
    id = "capacity-reservation"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        out = []
        for pool in live_pools(spec):
            rid = pool.capacity_reservation_id
            if rid is None:
                continue
            subject = f"node_pools[{pool.name}].capacity_reservation_id"
            res = reservation(aws, rid)
            if res is None:
                out.append(
                    Finding(
                        self.id,
                        "error",
                        subject,
                        f"{rid} does not exist in {aws_provider(spec).region}",
                        "check the id and the region",
                    )
                )
                continue
            if res.get("ReservationType") == CAPACITY_BLOCK:
                out.append(
                    Finding(
                        self.id,
                        "error",
                        subject,
                        f"{rid} is a Capacity Block",
                        f"move it to node_pools[{pool.name}].capacity_block_id",
                    )
                )
                continue
            if res.get("State") != "active":
                out.append(
                    Finding(
                        self.id,
                        "error",
                        subject,
                        f"{rid} is {res.get('State')}, not active",
                        "use an active reservation",
                    )
                )
            wrong = reservation_mismatch(spec, pool, res)
            if wrong:
                out.append(
                    Finding(
                        self.id,
                        "error",
                        subject,
                        f"{rid} does not match the pool: " + "; ".join(wrong),
                        "fix the pool or use a matching reservation",
                    )
                )
            out.extend(self._placement(spec, pool, res, subject))
            size = pool.capacity_reservation_size
            if size is not None and size != res.get("TotalInstanceCount"):
                out.append(
                    Finding(
                        self.id,
                        "warning",
                        f"node_pools[{pool.name}].capacity_reservation_size",
                        f"spec says {size}, AWS says {res.get('TotalInstanceCount')}",
                        "update capacity_reservation_size",
                    )
                )
            free = res.get("AvailableInstanceCount", 0)
            if free >= pool.count:
                continue
            # The stack's own nodes fill the reservation on every run after the first: not a problem.
            ours = own_instances_in(aws, spec, rid)
            if free + ours >= pool.count:
                continue
            others = res.get("TotalInstanceCount", 0) - free - ours
            out.append(
                Finding(
                    self.id,
                    "warning",
                    subject,
                    f"{rid} has {free} free of {res.get('TotalInstanceCount')}: this stack holds {ours}, "
                    f"{others} are used by instances outside it, and the pool needs {pool.count}",
                    "free the reservation (find them: aws ec2 describe-instances --filters "
                    f"Name=capacity-reservation-id,Values={rid}) or lower the pool's count",
                )
            )
        return out

    def _placement(
        self, spec: ClusterSpec, pool: NodePool, res: dict[str, Any], subject: str
    ) -> list[Finding]:
        arn = res.get("PlacementGroupArn")
        have = arn.rsplit("/", 1)[-1] if arn else None
        want = pool_group_name(spec, pool)
        if want is None or have == want:
            return []
        key = f"node_pools[{pool.name}].placement_group"
        rid = res.get("CapacityReservationId")
        if have:
            # "If the instance has attributes (placement group ARN, ...) that match a Capacity
            # Reservation in the specified placement group, the instance automatically runs in the
            # Capacity Reservation" (EC2 user guide, cr-cpg): the group is part of the match, so
            # launches into another group never use this reservation.
            return [
                Finding(
                    self.id,
                    "error",
                    subject,
                    f"{rid} was created in placement group {have}: only instances launched into that group "
                    f"can use it, and the pool launches into placement group {want}",
                    f"set {key}.name: {have}, so the pool launches into the reservation's group",
                )
            ]
        # A reservation outside any group still serves launches into one ("This is also true if you
        # launch the instance into a placement group"), but the group's capacity is not reserved.
        return [
            Finding(
                self.id,
                "warning",
                subject,
                f"{rid} was created outside any placement group, but the pool launches into "
                f"placement group {want}: launches may fail for lack of capacity in the group",
                f"drop {key}: instances placed outside the reservation's capacity may not launch",
            )
        ]


class PlacementGroup(Check):
    """A placement group with the stack's name but another strategy would make `up` fail; a
    group the spec names must exist."""

    id = "placement-group"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        out = []
        for pool in live_pools(spec):
            name = pool_group_name(spec, pool)
            if pool.placement_group is None or name is None:
                continue
            named = pool.placement_group.name is not None
            try:
                groups = aws.ec2.describe_placement_groups(GroupNames=[name])["PlacementGroups"]
            except ClientError as exc:
                if "Unknown" in error_code(exc) or "NotFound" in error_code(exc):
                    if named:
                        out.append(
                            Finding(
                                self.id,
                                "error",
                                f"node_pools[{pool.name}].placement_group.name",
                                f"placement group {name} does not exist in {aws_provider(spec).region}",
                                "name an existing group (aws ec2 describe-placement-groups), or drop name to "
                                "let the stack create one",
                            )
                        )
                    continue  # the stack creates it
                raise
            for group in groups:
                if group.get("Strategy") != pool.placement_group.strategy:
                    out.append(
                        Finding(
                            self.id,
                            "error",
                            f"node_pools[{pool.name}].placement_group",
                            f"placement group {name} exists with strategy {group.get('Strategy')}",
                            f"delete it (aws ec2 delete-placement-group --group-name {name}) or set strategy: {group.get('Strategy')}",
                        )
                    )
        return out
