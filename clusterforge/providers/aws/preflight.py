"""Preflight for AWS stacks: what would make `pulumi up` fail or build the wrong cluster,
found with read-only boto3 calls before anything is created.

Checks are small classes with stable ids, run in the order of ``CHECKS``. Each returns
findings (level, message, and the fix); an exception inside a check becomes an error finding,
never a crash. Missing or expired credentials stop the run with one line.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from botocore.exceptions import BotoCoreError, ClientError

from clusterforge.providers.aws.preflight_base import (
    AwsClients,
    Check,
    CredentialsError,
    Finding,
    credential_problem,
    make_clients,
)
from clusterforge.providers.aws.preflight_blocks import CapacityBlock
from clusterforge.providers.aws.preflight_capacity import CapacityReservation, PlacementGroup
from clusterforge.providers.aws.preflight_instance import (
    VCPU_QUOTAS,
    Credentials,
    InstanceTypeFacts,
    InstanceTypeOffered,
    VcpuQuota,
    quota_for,
)
from clusterforge.spec.models import ClusterSpec

__all__ = [
    "CHECKS",
    "VCPU_QUOTAS",
    "AwsClients",
    "CapacityBlock",
    "CapacityReservation",
    "Check",
    "Credentials",
    "CredentialsError",
    "Finding",
    "InstanceTypeFacts",
    "InstanceTypeOffered",
    "PlacementGroup",
    "VcpuQuota",
    "credential_problem",
    "make_clients",
    "quota_for",
    "run_preflight",
]

CHECKS: list[Check] = [
    Credentials(),
    InstanceTypeOffered(),
    InstanceTypeFacts(),
    VcpuQuota(),
    CapacityReservation(),
    CapacityBlock(),
    PlacementGroup(),
]


def run_preflight(
    spec: ClusterSpec, aws: AwsClients, now: dt.datetime | None = None, checks: Iterable[Check] = CHECKS
) -> list[Finding]:
    """Every finding, in check order. Raises ``CredentialsError`` (one line) when the
    credentials are the problem: every other check would fail for the same reason."""
    now = now or dt.datetime.now(dt.UTC)
    suppressed = set(spec.suppress_checks)
    out: list[Finding] = []
    for check in checks:
        if check.id in suppressed:
            continue
        try:
            out.extend(check.run(spec, aws, now))
        except (ClientError, BotoCoreError) as exc:
            line = credential_problem(exc)
            if line is not None:
                raise CredentialsError(line) from None
            out.append(
                Finding(
                    check.id,
                    "error",
                    "preflight",
                    f"AWS call failed: {exc}",
                    "retry; if it persists, check IAM permissions",
                )
            )
        except Exception as exc:  # noqa: BLE001 - a bug in a check must not hide the other checks' findings
            out.append(
                Finding(
                    check.id,
                    "error",
                    "preflight",
                    f"check failed: {type(exc).__name__}: {exc}",
                    "report this as a clusterforge bug",
                )
            )
    return out
