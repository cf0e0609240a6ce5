"""Preflight check on Capacity Blocks for ML: the block exists, is usable now, and its
instances will live long enough to be certified.

Facts from the EC2 user guide ("Work with Capacity Blocks", "View Capacity Blocks", "Find and
purchase Capacity Blocks") and the EC2 API model (CapacityReservationState):

- "Thirty minutes before the reservation expires, we begin to terminate any instances that are
  still running in the Capacity Block": the usable window ends at EndDate - 30 min.
- Only an ``active`` block launches instances; ``scheduled``, ``payment-pending``,
  ``assessing``, ``delayed`` and ``pending`` may still become active; ``payment-failed``
  ("your Capacity Block was released"), ``expired``, ``cancelled``, ``cancelling``, ``failed``,
  ``unsupported`` and ``unavailable`` never will.
- Offerings come for 1, 2, 4, 8, 16, 32 or 64 instances, at most 64 per block, and
  DescribeCapacityBlockOfferings pages with NextToken.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from clusterforge.providers.aws.preflight_base import (
    AwsClients,
    Check,
    Finding,
    Level,
    aws_provider,
    error_code,
    live_pools,
)
from clusterforge.providers.aws.preflight_capacity import CAPACITY_BLOCK, reservation, reservation_mismatch
from clusterforge.spec.models import ClusterSpec, NodePool

TERMINATION_LEAD = dt.timedelta(minutes=30)
# Less usable time than this left before termination: certification may not finish.
SHORT_NOTICE = dt.timedelta(hours=2)
WAITING_STATES = frozenset({"scheduled", "payment-pending", "assessing", "delayed", "pending"})
GONE_STATES = frozenset(
    {"expired", "cancelled", "cancelling", "failed", "payment-failed", "unsupported", "unavailable"}
)
BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64)


def block_size_for(count: int) -> int | None:
    """The smallest offering size that holds ``count`` instances; None above 64."""
    return next((size for size in BLOCK_SIZES if size >= count), None)


class CapacityBlock(Check):
    id = "capacity-block"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        out = []
        for pool in live_pools(spec):
            if pool.capacity_block_id is not None:
                out.extend(self._one(spec, pool, pool.capacity_block_id, aws, now))
        return out

    def _one(
        self, spec: ClusterSpec, pool: NodePool, rid: str, aws: AwsClients, now: dt.datetime
    ) -> list[Finding]:
        subject = f"node_pools[{pool.name}].capacity_block_id"
        res = reservation(aws, rid)
        if res is None or res.get("ReservationType") != CAPACITY_BLOCK:
            what = "does not exist" if res is None else "is not a Capacity Block"
            return [self._finding("error", subject, f"{rid} {what}", offer_fix(aws, spec, pool))]
        state = str(res.get("State"))
        start, end = res.get("StartDate"), res.get("EndDate")
        if state in GONE_STATES:
            when = f", ended {end.isoformat()}" if end and state == "expired" else ""
            return [
                self._finding(
                    "error",
                    subject,
                    f"{rid} is {state}{when}: it holds no capacity",
                    offer_fix(aws, spec, pool),
                )
            ]
        if start and now < start:
            return [
                self._finding(
                    "error",
                    subject,
                    f"{rid} starts at {start.isoformat()} ({state}): its instances cannot launch before",
                    f"run again after {start.isoformat()}",
                )
            ]
        if state in WAITING_STATES:
            return [
                self._finding(
                    "error", subject, f"{rid} is {state}, not yet active", "run again once it is active"
                )
            ]
        out = []
        if end is not None:
            terminate = end - TERMINATION_LEAD
            if now >= terminate:
                out.append(
                    self._finding(
                        "error",
                        subject,
                        f"{rid} ends at {end.isoformat()}; AWS terminates its instances from {terminate.isoformat()}",
                        offer_fix(aws, spec, pool),
                    )
                )
                return out
            if terminate - now < SHORT_NOTICE:
                out.append(
                    self._finding(
                        "warning",
                        subject,
                        f"{rid}: AWS terminates its instances from {terminate.isoformat()} (30 min before its end), "
                        f"{int((terminate - now).total_seconds() // 60)} min from now",
                        "certification may not finish; extend the block or buy a new one",
                    )
                )
        wrong = reservation_mismatch(spec, pool, res)
        if wrong:
            out.append(
                self._finding(
                    "error",
                    subject,
                    f"{rid} does not match the pool: " + "; ".join(wrong),
                    "fix the pool or buy a matching block",
                )
            )
        return out

    def _finding(self, level: Level, subject: str, message: str, fix: str) -> Finding:
        return Finding(self.id, level, subject, message, fix)


def offer_fix(aws: AwsClients, spec: ClusterSpec, pool: NodePool) -> str:
    """A purchasable block for this pool, if AWS offers one (the fix is then concrete). A failed
    offering call never hides the finding it is the fix for."""
    zone = aws_provider(spec).availability_zone
    size = block_size_for(pool.count)
    if size is None:
        return f"a Capacity Block holds at most 64 instances; split pool {pool.name!r} ({pool.count}) over several blocks"
    generic = f"buy a Capacity Block for {size} x {pool.instance_type} in {zone} and set its cr- id"
    try:
        offers = _offerings(aws, pool.instance_type, size)
    except (ClientError, BotoCoreError) as exc:
        code = error_code(exc) if isinstance(exc, ClientError) else type(exc).__name__
        return f"{generic} (listing offerings failed: {code})"
    here = sorted((o for o in offers if o.get("AvailabilityZone") == zone), key=lambda o: o["StartDate"])
    if not here:
        return generic
    o = here[0]
    return (
        f"buy offering {o['CapacityBlockOfferingId']} ({size} x {pool.instance_type}, {o['StartDate'].isoformat()} "
        f"to {o['EndDate'].isoformat()}, upfront {o.get('UpfrontFee')} {o.get('CurrencyCode', '')}) and set its cr- id"
    )


def _offerings(aws: AwsClients, instance_type: str, count: int) -> list[dict[str, Any]]:
    pages = aws.ec2.get_paginator("describe_capacity_block_offerings").paginate(
        InstanceType=instance_type, InstanceCount=count, CapacityDurationHours=24
    )
    return [o for page in pages for o in page.get("CapacityBlockOfferings", [])]
