"""Preflight for AWS stacks: what would make `pulumi up` fail or build the wrong cluster,
found with read-only boto3 calls before anything is created.

Checks are small classes with stable ids, run in the order of ``CHECKS``. Each returns
findings (level, message, and the fix); an exception inside a check becomes an error finding,
never a crash. Missing or expired credentials stop the run with one line.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from clusterforge.catalog import load_hardware
from clusterforge.providers.base import Problem
from clusterforge.spec.models import AwsProvider, ClusterSpec, NodePool

Level = Literal["error", "warning", "info"]

# Service Quotas codes of the On-Demand vCPU quotas, by instance family (first letters of the
# type). Codes as the Service Quotas console and `aws service-quotas get-service-quota` name them.
VCPU_QUOTAS: dict[str, tuple[str, str]] = {
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "vt": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "inf": ("L-1945791B", "Running On-Demand Inf instances"),
    **{
        f: ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances")
        for f in ("a", "c", "d", "h", "i", "m", "r", "t", "z")
    },
}
CAPACITY_BLOCK = "capacity-block"
CREDENTIAL_ERRORS = {
    "ExpiredToken": "expired",
    "ExpiredTokenException": "expired",
    "RequestExpired": "expired",
    "InvalidClientTokenId": "not valid",
    "UnrecognizedClientException": "not valid",
    "SignatureDoesNotMatch": "not valid",
    "AuthFailure": "not valid",
}


@dataclass(frozen=True)
class Finding:
    id: str  # the check id; suppress with spec.suppress_checks
    level: Level
    subject: str  # what it is about, as a spec key path: "node_pools[gpu]"
    message: str
    fix: str = ""

    def render(self) -> str:
        fix = f"\n    fix: {self.fix}" if self.fix else ""
        return f"{self.level}: {self.subject}: {self.message} [{self.id}]{fix}"

    def to_problem(self) -> Problem:
        level: Literal["error", "warning"] = "error" if self.level == "error" else "warning"
        fix = f" Fix: {self.fix}" if self.fix else ""
        return Problem(level, self.id, f"{self.subject}: {self.message}.{fix}")


@dataclass(frozen=True)
class AwsClients:
    ec2: Any
    quotas: Any  # service-quotas
    sts: Any


def make_clients(region: str, endpoint_url: str | None = None, session: Any = None) -> AwsClients:
    """boto3 clients for ``region``; ``endpoint_url`` points them at a local AWS API (tests)."""
    import boto3

    session = session or boto3.session.Session()
    kw = {"region_name": region, "endpoint_url": endpoint_url}
    return AwsClients(
        ec2=session.client("ec2", **kw),
        quotas=session.client("service-quotas", **kw),
        sts=session.client("sts", **kw),
    )


class CredentialsError(Exception):
    """AWS credentials are missing, expired or invalid; the message is one line to show."""


def credential_problem(exc: BaseException) -> str | None:
    """One line saying what is wrong with the credentials, if that is what ``exc`` is."""
    fix = "run `aws sso login` or `aws configure` (or set AWS_PROFILE) and try again"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return f"no AWS credentials found: {fix}"
    name = type(exc).__name__
    if name in ("TokenRetrievalError", "SSOTokenLoadError", "UnauthorizedSSOTokenError"):
        return f"the AWS SSO session has expired: {fix}"
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code in CREDENTIAL_ERRORS:
            return f"the AWS credentials are {CREDENTIAL_ERRORS[code]} ({code}): {fix}"
    return None


def _pools(spec: ClusterSpec) -> list[NodePool]:
    return [p for p in spec.node_pools if p.count > 0]


def _aws(spec: ClusterSpec) -> AwsProvider:
    if not isinstance(spec.provider, AwsProvider):
        raise ValueError(f"provider.kind is {spec.provider.kind!r}, not 'aws'")
    return spec.provider


def _code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


class Check:
    id = ""

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        raise NotImplementedError


class Credentials(Check):
    id = "aws-credentials"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        identity = aws.sts.get_caller_identity()
        return [Finding(self.id, "info", "provider", f"account {identity['Account']} as {identity['Arn']}")]


class InstanceTypeOffered(Check):
    id = "instance-type-offered"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        az = _aws(spec).availability_zone
        out = []
        for pool in _pools(spec):
            found = aws.ec2.describe_instance_type_offerings(
                LocationType="availability-zone",
                Filters=[
                    {"Name": "instance-type", "Values": [pool.instance_type]},
                    {"Name": "location", "Values": [az]},
                ],
            )["InstanceTypeOfferings"]
            if found:
                continue
            elsewhere = aws.ec2.describe_instance_type_offerings(
                LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": [pool.instance_type]}],
            )["InstanceTypeOfferings"]
            zones = sorted({o["Location"] for o in elsewhere})
            fix = (
                f"set provider.availability_zone to one of {', '.join(zones)}"
                if zones
                else f"{pool.instance_type} is not offered in {_aws(spec).region}: choose another region"
            )
            out.append(
                Finding(
                    self.id,
                    "error",
                    f"node_pools[{pool.name}]",
                    f"{pool.instance_type} is not offered in {az}",
                    fix,
                )
            )
        return out


class InstanceTypeFacts(Check):
    """The catalogue's GPU and network figures drive the launch template: they must be AWS's."""

    id = "instance-type-facts"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        hw = load_hardware()
        out = []
        types = sorted({p.instance_type for p in _pools(spec)})
        for name in types:
            it = hw.get(name)
            if it is None:
                out.append(
                    Finding(
                        self.id,
                        "error",
                        "node_pools",
                        f"{name} is not in the hardware catalogue",
                        "add it to clusterforge/data/hardware.yaml",
                    )
                )
                continue
            try:
                (desc,) = aws.ec2.describe_instance_types(InstanceTypes=[name])["InstanceTypes"]
            except ClientError as exc:
                if _code(exc).startswith("InvalidInstanceType"):
                    out.append(
                        Finding(
                            self.id, "error", "node_pools", f"AWS does not know {name}", "fix instance_type"
                        )
                    )
                    continue
                raise
            gpus = (desc.get("GpuInfo") or {}).get("Gpus") or [{}]
            net = desc.get("NetworkInfo") or {}
            aws_facts = {
                "vcpus": desc.get("VCpuInfo", {}).get("DefaultVCpus"),
                "gpu count": gpus[0].get("Count", 0),
                "gpu model": gpus[0].get("Name"),
                "efa interfaces": (net.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0),
                "network cards": net.get("MaximumNetworkCards", 1),
            }
            ours = {
                "vcpus": it.vcpus,
                "gpu count": it.gpu.count if it.gpu else 0,
                "gpu model": it.gpu.model if it.gpu else None,
                "efa interfaces": it.network.efa_interfaces,
                "network cards": it.network.network_cards,
            }
            wrong = [f"{k}: catalogue {ours[k]}, AWS {aws_facts[k]}" for k in ours if ours[k] != aws_facts[k]]
            if wrong:
                out.append(
                    Finding(
                        self.id,
                        "error",
                        f"instance type {name}",
                        "the hardware catalogue disagrees with DescribeInstanceTypes ("
                        + "; ".join(wrong)
                        + ")",
                        f"correct instance_types.{name} in clusterforge/data/hardware.yaml, citing the source",
                    )
                )
        return out


def quota_for(instance_type: str) -> tuple[str, str] | None:
    family = instance_type.split(".", 1)[0]
    for prefix in sorted(VCPU_QUOTAS, key=len, reverse=True):
        if family.startswith(prefix):
            return VCPU_QUOTAS[prefix]
    return None


class VcpuQuota(Check):
    id = "vcpu-quota"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        hw = load_hardware()
        region = _aws(spec).region
        need: dict[tuple[str, str], int] = {}
        out = []
        for pool in _pools(spec):
            quota = quota_for(pool.instance_type)
            it = hw.get(pool.instance_type)
            if it is None:
                continue  # instance-type-facts reports it
            if quota is None:
                out.append(
                    Finding(
                        self.id,
                        "warning",
                        f"node_pools[{pool.name}]",
                        f"no vCPU quota code known for {pool.instance_type}",
                        "check the quota in the Service Quotas console",
                    )
                )
                continue
            need[quota] = need.get(quota, 0) + pool.count * it.vcpus
        for (code, title), vcpus in sorted(need.items()):
            try:
                value = aws.quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
            except ClientError as exc:
                if _code(exc) != "NoSuchResourceException":
                    raise
                value = aws.quotas.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"][
                    "Value"
                ]
            if value < vcpus:
                out.append(
                    Finding(
                        self.id,
                        "error",
                        "node_pools",
                        f"the stack needs {vcpus} vCPUs of '{title}' ({code}) but the quota in {region} is {value:g}",
                        f"request an increase: aws service-quotas request-service-quota-increase --region {region} "
                        f"--service-code ec2 --quota-code {code} --desired-value {vcpus}",
                    )
                )
        return out


def _reservation(aws: AwsClients, rid: str) -> dict[str, Any] | None:
    try:
        found = aws.ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"]
    except ClientError as exc:
        if "NotFound" in _code(exc) or "Malformed" in _code(exc):
            return None
        raise
    return found[0] if found else None


def _placement_mismatch(spec: ClusterSpec, pool: NodePool, res: dict[str, Any]) -> list[str]:
    wrong = []
    if res.get("InstanceType") != pool.instance_type:
        wrong.append(f"instance type {res.get('InstanceType')} (pool: {pool.instance_type})")
    if res.get("AvailabilityZone") != _aws(spec).availability_zone:
        wrong.append(
            f"availability zone {res.get('AvailabilityZone')} (spec: {_aws(spec).availability_zone})"
        )
    total = res.get("TotalInstanceCount", 0)
    if total < pool.count:
        wrong.append(f"{total} instances (pool count: {pool.count})")
    return wrong


class CapacityReservation(Check):
    id = "capacity-reservation"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        out = []
        for pool in _pools(spec):
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
                        f"{rid} does not exist in {_aws(spec).region}",
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
        for pool in _pools(spec):
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
        zone = _aws(spec).availability_zone
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
        for pool in _pools(spec):
            if pool.placement_group is None:
                continue
            name = f"{spec.stack}-{pool.name}"
            try:
                groups = aws.ec2.describe_placement_groups(GroupNames=[name])["PlacementGroups"]
            except ClientError as exc:
                if "Unknown" in _code(exc) or "NotFound" in _code(exc):
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
        except Exception as exc:  # a bug in a check must not hide the other checks' findings
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
