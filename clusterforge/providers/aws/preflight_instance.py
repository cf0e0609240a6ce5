"""Preflight checks on the instance types: credentials, offerings in the AZ, catalogue facts,
On-Demand vCPU quotas."""

from __future__ import annotations

import datetime as dt

from botocore.exceptions import ClientError

from clusterforge.catalog import load_hardware
from clusterforge.providers.aws.preflight_base import (
    AwsClients,
    Check,
    Finding,
    aws_provider,
    error_code,
    live_pools,
)
from clusterforge.spec.models import ClusterSpec

# Service Quotas codes of the On-Demand vCPU quotas, by instance family prefix (the longest
# prefix wins: trn1 is Trn, not the Standard "t"; dl1 is DL, not "d"; hpc7a is HPC, not "h").
# Codes and names as `aws service-quotas list-service-quotas --service-code ec2` prints them.
VCPU_QUOTAS: dict[str, tuple[str, str]] = {
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "vt": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
    "inf": ("L-1945791B", "Running On-Demand Inf instances"),
    "trn": ("L-2C3B7624", "Running On-Demand Trn instances"),
    "dl": ("L-6E869C2A", "Running On-Demand DL instances"),
    "hpc": ("L-F7808C92", "Running On-Demand HPC instances"),
    "f": ("L-74FC7D96", "Running On-Demand F instances"),
    "x": ("L-7295265B", "Running On-Demand X instances"),
    "u-": ("L-43DA4232", "Running On-Demand High Memory instances"),
    **{
        f: ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances")
        for f in ("a", "c", "d", "h", "i", "m", "r", "t", "z")
    },
}


class Credentials(Check):
    id = "aws-credentials"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        identity = aws.sts.get_caller_identity()
        return [Finding(self.id, "info", "provider", f"account {identity['Account']} as {identity['Arn']}")]


class InstanceTypeOffered(Check):
    id = "instance-type-offered"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        az = aws_provider(spec).availability_zone
        out = []
        for pool in live_pools(spec):
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
                else f"{pool.instance_type} is not offered in {aws_provider(spec).region}: choose another region"
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
        types = sorted({p.instance_type for p in live_pools(spec)})
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
                if error_code(exc).startswith("InvalidInstanceType"):
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
    if family.startswith("u") and "-" in family:  # u-6tb1: High Memory
        family = "u-"
    for prefix in sorted(VCPU_QUOTAS, key=len, reverse=True):
        if family.startswith(prefix):
            return VCPU_QUOTAS[prefix]
    return None


class VcpuQuota(Check):
    id = "vcpu-quota"

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        hw = load_hardware()
        region = aws_provider(spec).region
        need: dict[tuple[str, str], int] = {}
        out = []
        for pool in live_pools(spec):
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
                if error_code(exc) != "NoSuchResourceException":
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
