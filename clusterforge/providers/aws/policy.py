"""Security and fabric policies over a Pulumi program's resource graph.

Each policy is a plain function ``(resources, context) -> list[Violation]`` over the resources
a program registers (type token, logical name, physical id, inputs as the engine sees them,
camelCase). The mock tests record that list under ``pulumi.runtime.set_mocks``; the same
functions run against a mutated list or a mutated spec to prove each rule can fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from ipaddress import ip_network
from typing import Any

SG = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
VOLUME = "aws:ebs/volume:Volume"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
BUCKET_SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"

# Types that take tags and that this program creates. Rules, route tables' associations and
# bucket sub-configurations have no tags of their own in the AWS API (or inherit them).
TAGGABLE = frozenset(
    {
        "aws:ec2/vpc:Vpc",
        "aws:ec2/subnet:Subnet",
        "aws:ec2/routeTable:RouteTable",
        "aws:ec2/internetGateway:InternetGateway",
        "aws:ec2/natGateway:NatGateway",
        "aws:ec2/eip:Eip",
        "aws:ec2/vpcEndpoint:VpcEndpoint",
        SG,
        INGRESS,
        EGRESS,
        LAUNCH_TEMPLATE,
        INSTANCE,
        PLACEMENT_GROUP,
        VOLUME,
        LUSTRE,
        "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation",
        BUCKET,
        "aws:iam/role:Role",
        "aws:iam/instanceProfile:InstanceProfile",
    }
)
STACK_TAG = "clusterforge:stack"
NODE_TAGS = (
    "clusterforge:stack",
    "clusterforge:pool",
    "clusterforge:node",
    "clusterforge:role",
    "clusterforge:certification",
)
# Outbound to the whole internet is allowed only for these (package mirrors through a NAT gateway).
INTERNET_EGRESS_PORTS = frozenset({80, 443})
# FSx for Lustre encrypts at rest on every deployment type except SCRATCH_1.
ENCRYPTED_LUSTRE_TYPES = frozenset({"SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"})
SSE_ALGORITHMS = frozenset({"AES256", "aws:kms", "aws:kms:dsse"})
OPEN = frozenset({"0.0.0.0/0", "::/0"})


@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    id: str
    inputs: dict[str, Any]
    # Resource options as the engine receives them (urn, dependencies, ignoreChanges,
    # deleteBeforeReplace, retainOnDelete); empty where the recorder does not know them.
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicyContext:
    admin_cidrs: tuple[str, ...] = ()
    vpc_cidr: str = "10.0.0.0/16"


@dataclass(frozen=True)
class Violation:
    policy: str
    resource: str
    message: str

    def render(self) -> str:
        return f"{self.policy}: {self.resource}: {self.message}"


@dataclass
class Graph:
    """Resources by type and id, for the lookups the policies make."""

    resources: list[Resource]
    by_id: dict[str, Resource] = field(init=False)

    by_urn: dict[str, Resource] = field(init=False)

    def __post_init__(self) -> None:
        self.by_id = {r.id: r for r in self.resources}
        self.by_urn = {r.options["urn"]: r for r in self.resources if r.options.get("urn")}

    def of(self, type_: str) -> list[Resource]:
        return [r for r in self.resources if r.type == type_]


def _efa_groups(lt: Resource) -> set[str]:
    """Security groups on the EFA interfaces of a launch template."""
    groups: set[str] = set()
    for nic in lt.inputs.get("networkInterfaces") or []:
        if nic.get("interfaceType") in ("efa", "efa-only"):
            groups.update(nic.get("securityGroups") or [])
    return groups


def _is_efa(lt: Resource) -> bool:
    return any(
        n.get("interfaceType") in ("efa", "efa-only") for n in lt.inputs.get("networkInterfaces") or []
    )


def _instance_lt(graph: Graph, instance: Resource) -> Resource | None:
    ref = (instance.inputs.get("launchTemplate") or {}).get("id")
    return graph.by_id.get(ref) if ref else None


def no_open_ingress(graph: Graph, ctx: PolicyContext) -> list[Violation]:
    """Ingress never from 0.0.0.0/0 or ::/0; CIDR ingress only SSH from a listed admin CIDR or
    from inside the VPC; egress to the internet only on tcp 80/443."""
    out = []
    admin = {str(ip_network(c)) for c in ctx.admin_cidrs}
    vpc = ip_network(ctx.vpc_cidr)
    for rule in graph.of(INGRESS):
        cidr = rule.inputs.get("cidrIpv4") or rule.inputs.get("cidrIpv6")
        if cidr is None:
            continue  # from a security group or prefix list
        ports = (rule.inputs.get("fromPort"), rule.inputs.get("toPort"))
        if cidr in OPEN:
            out.append(Violation("no-open-ingress", rule.name, f"ingress from {cidr} (ports {ports})"))
        elif ports == (22, 22) and rule.inputs.get("ipProtocol") == "tcp" and str(ip_network(cidr)) in admin:
            continue
        elif ip_network(cidr).version != vpc.version or not ip_network(cidr).subnet_of(vpc):  # type: ignore[arg-type]  # same IP version: checked on the left
            out.append(
                Violation(
                    "no-open-ingress",
                    rule.name,
                    f"ingress from {cidr} (ports {ports}): not an admin SSH rule",
                )
            )
    for rule in graph.of(EGRESS):
        cidr = rule.inputs.get("cidrIpv4") or rule.inputs.get("cidrIpv6")
        if cidr in OPEN:
            port = rule.inputs.get("fromPort")
            if (
                rule.inputs.get("ipProtocol") != "tcp"
                or port != rule.inputs.get("toPort")
                or port not in INTERNET_EGRESS_PORTS
            ):
                out.append(Violation("no-open-ingress", rule.name, f"egress to {cidr} beyond tcp 80/443"))
    return out


def _is_capacity_block(lt: Resource) -> bool:
    return (lt.inputs.get("instanceMarketOptions") or {}).get("marketType") == "capacity-block"


def efa_fabric(graph: Graph, ctx: PolicyContext) -> list[Violation]:
    """Every EFA pool sits in one placement group (a Capacity Block's instances are placed
    together by AWS and need none: "Capacity Blocks for ML", EC2 user guide), and its EFA
    security groups allow all traffic in from and out to themselves."""
    out = []
    rules = [(r, "in") for r in graph.of(INGRESS)] + [(r, "out") for r in graph.of(EGRESS)]
    for lt in graph.of(LAUNCH_TEMPLATE):
        if not _is_efa(lt):
            continue
        instances = [i for i in graph.of(INSTANCE) if _instance_lt(graph, i) is lt]
        groups = {i.inputs.get("placementGroup") for i in instances}
        if _is_capacity_block(lt) and groups <= {None, ""}:
            pass  # AWS co-locates a Capacity Block's instances
        elif not instances or None in groups or "" in groups:
            out.append(Violation("efa-fabric", lt.name, "EFA instances outside a placement group"))
        elif len(groups) > 1:
            out.append(
                Violation(
                    "efa-fabric",
                    lt.name,
                    f"EFA instances split over placement groups {sorted(g for g in groups if g)}",
                )
            )
        for sg in _efa_groups(lt):
            for direction in ("in", "out"):
                if not any(
                    r.inputs.get("securityGroupId") == sg
                    and r.inputs.get("referencedSecurityGroupId") == sg
                    and r.inputs.get("ipProtocol") == "-1"
                    for r, d in rules
                    if d == direction
                ):
                    name = graph.by_id[sg].name if sg in graph.by_id else sg
                    out.append(
                        Violation(
                            "efa-fabric",
                            name,
                            f"EFA security group: no all-traffic {direction}bound rule referencing itself",
                        )
                    )
    return out


def imdsv2(graph: Graph, ctx: PolicyContext) -> list[Violation]:
    """IMDSv2 (http_tokens=required) on every launch template and every instance."""
    out = []

    def required(res: Resource | None) -> bool:
        return res is not None and (res.inputs.get("metadataOptions") or {}).get("httpTokens") == "required"

    for lt in graph.of(LAUNCH_TEMPLATE):
        if not required(lt):
            out.append(Violation("imdsv2", lt.name, "metadata_options.http_tokens is not 'required'"))
    for inst in graph.of(INSTANCE):
        if not (required(inst) or required(_instance_lt(graph, inst))):
            out.append(
                Violation("imdsv2", inst.name, "neither the instance nor its launch template requires IMDSv2")
            )
    return out


def _truthy(value: Any) -> bool:
    return value is True or value == "true"


def encryption(graph: Graph, ctx: PolicyContext) -> list[Violation]:
    """Every EBS volume, file system and bucket is encrypted at rest."""
    out = []
    for lt in graph.of(LAUNCH_TEMPLATE):
        for bdm in lt.inputs.get("blockDeviceMappings") or []:
            if not _truthy((bdm.get("ebs") or {}).get("encrypted")):
                out.append(Violation("encryption", lt.name, f"volume {bdm.get('deviceName')} not encrypted"))
    for inst in graph.of(INSTANCE):
        volumes = [inst.inputs.get("rootBlockDevice")] + list(inst.inputs.get("ebsBlockDevices") or [])
        for vol in filter(None, volumes):
            if not _truthy(vol.get("encrypted")):
                out.append(Violation("encryption", inst.name, "block device not encrypted"))
    for vol in graph.of(VOLUME):
        if not _truthy(vol.inputs.get("encrypted")):
            out.append(Violation("encryption", vol.name, "EBS volume not encrypted"))
    for fs in graph.of(LUSTRE):
        if fs.inputs.get("deploymentType", "SCRATCH_1") not in ENCRYPTED_LUSTRE_TYPES and not fs.inputs.get(
            "kmsKeyId"
        ):
            out.append(
                Violation(
                    "encryption",
                    fs.name,
                    f"deployment type {fs.inputs.get('deploymentType')} is not encrypted at rest",
                )
            )
    sse = {r.inputs.get("bucket"): r for r in graph.of(BUCKET_SSE)}
    for bucket in graph.of(BUCKET):
        config = sse.get(bucket.id)
        algorithms = [
            ((rule.get("applyServerSideEncryptionByDefault") or {}).get("sseAlgorithm"))
            for rule in (config.inputs.get("rules") or [] if config else [])
        ]
        if not config or not algorithms or not all(a in SSE_ALGORITHMS for a in algorithms):
            out.append(Violation("encryption", bucket.name, "no default server-side encryption"))
    return out


def public_access_blocked(graph: Graph, ctx: PolicyContext) -> list[Violation]:
    """Every bucket has all four public access block settings on."""
    out = []
    blocks = {r.inputs.get("bucket"): r for r in graph.of(BUCKET_PAB)}
    keys = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    for bucket in graph.of(BUCKET):
        block = blocks.get(bucket.id)
        missing = [k for k in keys if not block or block.inputs.get(k) is not True]
        if missing:
            out.append(Violation("public-access-blocked", bucket.name, f"not blocked: {', '.join(missing)}"))
    return out


def bastion_unprivileged(graph: Graph, ctx: PolicyContext) -> list[Violation]:
    """The internet-facing bastion carries no instance role: nothing on it may read or write
    the checkpoint bucket, or act on the cluster through SSM."""
    out = []
    for inst in graph.of(INSTANCE):
        if (inst.inputs.get("tags") or {}).get("clusterforge:role") != "bastion":
            continue
        lt = _instance_lt(graph, inst)
        profile = inst.inputs.get("iamInstanceProfile") or (
            lt.inputs.get("iamInstanceProfile") if lt else None
        )
        if profile:
            out.append(
                Violation("bastion-unprivileged", inst.name, f"bastion has instance profile {profile}")
            )
    return out


def tagged(graph: Graph, ctx: PolicyContext) -> list[Violation]:
    """Every taggable resource carries the stack tag; every instance its node tags too."""
    out = []
    for res in graph.resources:
        if res.type not in TAGGABLE:
            continue
        tags = res.inputs.get("tags") or {}
        wanted = NODE_TAGS if res.type == INSTANCE else (STACK_TAG,)
        missing = [k for k in wanted if not tags.get(k)]
        if missing:
            out.append(Violation("tagged", res.name, f"missing tags: {', '.join(missing)}"))
    return out


Policy = Callable[[Graph, PolicyContext], list[Violation]]
# Explicit and ordered: every policy the stacks must pass.
POLICIES: dict[str, Policy] = {
    "no-open-ingress": no_open_ingress,
    "efa-fabric": efa_fabric,
    "imdsv2": imdsv2,
    "encryption": encryption,
    "public-access-blocked": public_access_blocked,
    "bastion-unprivileged": bastion_unprivileged,
    "tagged": tagged,
}


def check(
    resources: Iterable[Resource], ctx: PolicyContext, only: Iterable[str] | None = None
) -> list[Violation]:
    graph = Graph(list(resources))
    names = list(only) if only is not None else list(POLICIES)
    return [v for name in names for v in POLICIES[name](graph, ctx)]
