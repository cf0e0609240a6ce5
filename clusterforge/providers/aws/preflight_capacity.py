"""Preflight checks on capacity: On-Demand Capacity Reservations, Capacity Blocks for ML,
placement groups."""

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


def _reservation(aws: AwsClients, rid: str) -> dict[str, Any] | None:
    try:
        found = aws.ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    except ClientError as exc:
        if "NotFound" in error_code(exc) or "Malformed" in error_code(exc):
            return None
        raise
    return found[0] if found else None


def _placement_mismatch(spec: ClusterSpec, pool: NodePool, res: dict[str, Any]) -> list[str]:
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
            res = _reservation(aws, rid)
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
            wrong = _placement_mismatch(spec, pool, res)
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
            if pool.placement_group is not None:
                want = f"{spec.stack}-{pool.name}"
                arn = res.get("PlacementGroupArn")
                have = arn.rsplit("/", 1)[-1] if arn else None
                if have != want:
                    where = f"in placement group {have}" if have else "outside any cluster placement group"
                    out.append(
                        Finding(
                            self.id,
                            "warning",
                            subject,
                            f"{rid} was created {where}, but the pool launches into placement group {want}: "
                            "its instances may not match the reservation",
                            f"create the reservation in cluster placement group {want} (EC2 user guide, "
                            "'Capacity Reservations for cluster placement groups') or drop placement_group",
                        )
                    )
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
            if (
                res.get("InstanceMatchCriteria") == "targeted"
                or res.get("AvailableInstanceCount", 0) >= pool.count
            ):
                continue
            out.append(
                Finding(
                    self.id,
                    "warning",
                    subject,
                    f"{rid} has {res.get('AvailableInstanceCount')} free of {res.get('TotalInstanceCount')}",
                    "instances outside this stack are using it",
                )
            )
        return out


class CapacityBlock(Check):
    id = "capacity-block"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        out = []
        for pool in live_pools(spec):
            rid = pool.capacity_block_id
            if rid is None:
                continue
            subject = f"node_pools[{pool.name}].capacity_block_id"
            res = _reservation(aws, rid)
            if res is None or res.get("ReservationType") != CAPACITY_BLOCK:
                what = "does not exist" if res is None else "is not a Capacity Block"
                out.append(
                    Finding(self.id, "error", subject, f"{rid} {what}", self._offer(aws, spec, pool, now))
                )
                continue
            start, end = res.get("StartDate"), res.get("EndDate")
            if start and now < start:
                out.append(
                    Finding(
                        self.id,
                        "error",
                        subject,
                        f"{rid} starts at {start.isoformat()}: its instances cannot launch before",
                        f"run again after {start.isoformat()}",
                    )
                )
            elif end and now >= end or res.get("State") in ("expired", "cancelled", "failed"):
                out.append(
                    Finding(
                        self.id,
                        "error",
                        subject,
                        f"{rid} ended at {end.isoformat() if end else '?'} ({res.get('State')})",
                        self._offer(aws, spec, pool, now),
                    )
                )
            else:
                if end and end - now < dt.timedelta(hours=2):
                    out.append(
                        Finding(
                            self.id,
                            "warning",
                            subject,
                            f"{rid} ends at {end.isoformat()}: AWS terminates its instances then",
                            "certification may not finish; extend or buy a new block",
                        )
                    )
                wrong = _placement_mismatch(spec, pool, res)
                if wrong:
                    out.append(
                        Finding(
                            self.id,
                            "error",
                            subject,
                            f"{rid} does not match the pool: " + "; ".join(wrong),
                            "fix the pool or buy a matching block",
                        )
                    )
        return out

    @staticmethod
    def _offer(aws: AwsClients, spec: ClusterSpec, pool: NodePool, now: dt.datetime) -> str:
        """A purchasable block for this pool, if AWS offers one (the fix is then concrete)."""
        offers = aws.ec2.describe_capacity_block_offerings(
            InstanceType=pool.instance_type, InstanceCount=pool.count, CapacityDurationHours=24
        ).get("CapacityBlockOfferings", [])
        zone = aws_provider(spec).availability_zone
        offers = sorted(
            (o for o in offers if o.get("AvailabilityZone") == zone), key=lambda o: o["StartDate"]
        )
        if not offers:
            return (
                f"buy a Capacity Block for {pool.count} x {pool.instance_type} in {zone} and set its cr- id"
            )
        o = offers[0]
        return (
            f"buy offering {o['CapacityBlockOfferingId']} ({o['StartDate'].isoformat()} to {o['EndDate'].isoformat()}, "
            f"upfront {o.get('UpfrontFee')} {o.get('CurrencyCode', '')}) and set its cr- id"
        )


class PlacementGroup(Check):
    """A placement group with the stack's name but another strategy would make `up` fail."""

    id = "placement-group"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        out = []
        for pool in live_pools(spec):
            if pool.placement_group is None:
                continue
            name = f"{spec.stack}-{pool.name}"
            try:
                groups = aws.ec2.describe_placement_groups(GroupNames=[name])["PlacementGroups"]
            except ClientError as exc:
                if "Unknown" in error_code(exc) or "NotFound" in error_code(exc):
                    continue  # will be created
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
