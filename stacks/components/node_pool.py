"""One node pool: placement group, launch template, and one instance per node.

The launch template carries everything the nodes of a pool share: the AMI, IMDSv2, the
encrypted root volume, the instance profile, capacity targeting, and the network interfaces
laid out as AWS documents for multi-card EFA instance types ("Maximize network bandwidth on
Amazon EC2 instances with multiple network cards", EC2 user guide, efa-acc-inst-types):

- the primary interface is ENA, on network card 0, device 0 (it cannot be EFA-only);
- an EFA-only interface on network card 0, device 1;
- an EFA-only interface on device 0 of every further network card.

One ``aws.ec2.Instance`` per node, named ``<pool>-001`` …, so a single node can be replaced
(``pulumi up --replace <urn>``) without touching the others.

A second ``up`` must not replace certified nodes behind anyone's back. The AWS provider
replaces an instance whenever its launch template version input changes
(terraform-provider-aws ``internal/service/ec2/ec2_instance.go``, CustomizeDiff on
``launch_template.0.version``), and every template edit makes a new version. So an instance
ignores the version it was created with unless the spec pins one (``launch_template_version``):
rolling a pool onto a new template is a spec change that ``invoke plan`` shows, never a side
effect. Instances in a reservation or Capacity Block are deleted before their replacement is
created: a full reservation has no room for the new one while the old one runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi

from components import aws
from components import tags as t

ENA = "interface"  # what the EC2 API calls a plain ENA interface
EFA_ONLY = "efa-only"


@dataclass(frozen=True)
class InterfaceSlot:
    network_card_index: int
    device_index: int
    interface_type: str  # "interface" (ENA) | "efa-only"


def interface_layout(efa_interfaces: int, network_cards: int) -> list[InterfaceSlot]:
    """The primary ENA interface, then ``efa_interfaces`` EFA-only ones, as AWS lays them out.

    Card 0 device 1 first, then device 0 of cards 1, 2, …; a type with more EFA interfaces than
    cards gets the rest on device 1 of cards 1, 2, … (never two EFA devices at the same slot).
    """
    if efa_interfaces < 0 or network_cards < 1:
        raise ValueError(f"bad network facts: efa_interfaces={efa_interfaces}, network_cards={network_cards}")
    slots = [InterfaceSlot(0, 0, ENA)]
    free = (
        [(0, 1)]
        + [(card, 0) for card in range(1, network_cards)]
        + [(card, 1) for card in range(1, network_cards)]
    )
    if efa_interfaces > len(free):
        raise ValueError(f"{efa_interfaces} EFA interfaces do not fit on {network_cards} network cards")
    slots += [InterfaceSlot(card, device, EFA_ONLY) for card, device in free[:efa_interfaces]]
    return slots


@dataclass(frozen=True)
class RootVolumeArgs:
    size_gib: int
    device_name: str = "/dev/sda1"  # the AMI's root device: the mapping resizes it, not adds a disk
    type: str = "gp3"
    iops: int | None = None
    throughput_mibps: int | None = None


@dataclass(frozen=True)
class NodePoolArgs:
    stack: str
    pool: str
    role: str  # "gpu" | "head" | "login"
    instance_type: str
    node_names: list[str]
    efa_interfaces: int
    network_cards: int
    subnet_id: pulumi.Input[str]
    # Groups on the primary (IP) interface; EFA-only interfaces get only the cluster group.
    security_group_ids: Sequence[pulumi.Input[str]]
    cluster_sg_id: pulumi.Input[str]
    instance_profile_name: pulumi.Input[str] | None  # None: no instance profile (the bastion)
    image_id: pulumi.Input[str]
    root_volume: RootVolumeArgs
    placement_strategy: str | None = None  # "cluster" | "partition" | None (no placement group)
    partition_count: int | None = None
    placement_group_name: str | None = None  # an existing group: launch into it, create none
    launch_template_version: int | None = None  # None: keep each node's creation version
    capacity_reservation_id: str | None = None
    capacity_block_id: str | None = None
    key_name: str | None = None
    associate_public_ip: bool = False
    certification: str | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeOutputs:
    name: str
    pool: str
    role: str
    instance_type: str
    instance_id: pulumi.Output[str]
    private_ip: pulumi.Output[str]
    public_ip: pulumi.Output[str]
    availability_zone: pulumi.Output[str]


def user_data(node: str) -> str:
    """cloud-init: the hostname is the node name (Slurm's NodeName and the inventory agree)."""
    return f"#cloud-config\npreserve_hostname: false\nhostname: {node}\nfqdn: {node}\n"


class NodePool(pulumi.ComponentResource):
    nodes: list[NodeOutputs]
    placement_group_name: pulumi.Output[str] | None
    launch_template_id: pulumi.Output[str]

    def __init__(self, name: str, args: NodePoolArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterforge:compute:NodePool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        prefix = f"{args.stack}-{args.pool}"
        pool_tags = {**args.tags, t.POOL: args.pool, t.ROLE: args.role}

        pg = None
        if args.placement_strategy is not None and args.placement_group_name is None:
            pg = aws.ec2.PlacementGroup(
                prefix,
                name=prefix,
                strategy=args.placement_strategy,
                partition_count=args.partition_count if args.placement_strategy == "partition" else None,
                tags=t.with_name(pool_tags, prefix),
                opts=child,
            )
        lt = aws.ec2.LaunchTemplate(
            prefix,
            name_prefix=f"{prefix}-",
            image_id=args.image_id,
            instance_type=args.instance_type,
            key_name=args.key_name,
            update_default_version=True,
            iam_instance_profile=aws.ec2.LaunchTemplateIamInstanceProfileArgs(name=args.instance_profile_name)
            if args.instance_profile_name is not None
            else None,
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",  # IMDSv2 only
                http_put_response_hop_limit=2,  # containers on the node still reach IMDS
                instance_metadata_tags="enabled",
            ),
            block_device_mappings=[self._root_volume(args.root_volume)],
            network_interfaces=self._interfaces(args),
            capacity_reservation_specification=self._capacity(args),
            instance_market_options=(
                aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
                if args.capacity_block_id
                else None
            ),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags=pool_tags)
                for kind in ("instance", "volume", "network-interface")
            ],
            tags=t.with_name(pool_tags, prefix),
            opts=child,
        )

        group_name: pulumi.Input[str] | None = pg.name if pg is not None else args.placement_group_name
        grouped = group_name is not None
        pinned = args.launch_template_version
        version = str(pinned) if pinned is not None else lt.latest_version.apply(str)
        # The pipeline records the verdict in the certification tag; a later `up` must not undo it.
        ignored = [f'tags["{t.CERTIFICATION}"]'] + ([] if pinned is not None else ["launchTemplate.version"])
        reserved = args.capacity_reservation_id is not None or args.capacity_block_id is not None
        self.nodes = []
        for index, node in enumerate(args.node_names):
            partition = (index % args.partition_count) + 1 if grouped and args.partition_count else None
            instance = aws.ec2.Instance(
                node,
                launch_template=aws.ec2.InstanceLaunchTemplateArgs(id=lt.id, version=version),
                placement_group=group_name,
                placement_partition_number=partition if args.placement_strategy == "partition" else None,
                user_data=user_data(node),
                tags=t.with_name(
                    pool_tags,
                    f"{args.stack}-{node}",
                    **{t.NODE: node, t.CERTIFICATION: t.CERTIFICATION_PENDING},
                ),
                opts=pulumi.ResourceOptions(
                    parent=self, ignore_changes=ignored, delete_before_replace=reserved or None
                ),
            )
            self.nodes.append(
                NodeOutputs(
                    name=node,
                    pool=args.pool,
                    role=args.role,
                    instance_type=args.instance_type,
                    instance_id=instance.id,
                    private_ip=instance.private_ip,
                    public_ip=instance.public_ip,
                    availability_zone=instance.availability_zone,
                )
            )
        self.placement_group_name = pulumi.Output.from_input(group_name) if group_name is not None else None
        self.launch_template_id = lt.id
        self.register_outputs({"launch_template_id": lt.id, "nodes": [n.instance_id for n in self.nodes]})

    @staticmethod
    def _root_volume(volume: RootVolumeArgs) -> aws.ec2.LaunchTemplateBlockDeviceMappingArgs:
        return aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
            device_name=volume.device_name,
            ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                volume_size=volume.size_gib,
                volume_type=volume.type,
                iops=volume.iops,
                throughput=volume.throughput_mibps if volume.type == "gp3" else None,
                encrypted="true",
                delete_on_termination="true",
            ),
        )

    @staticmethod
    def _interfaces(args: NodePoolArgs) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
        out = []
        for slot in interface_layout(args.efa_interfaces, args.network_cards):
            primary = slot.interface_type == ENA
            out.append(
                aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                    network_card_index=slot.network_card_index,
                    device_index=slot.device_index,
                    interface_type=slot.interface_type,
                    subnet_id=args.subnet_id,
                    security_groups=list(args.security_group_ids) if primary else [args.cluster_sg_id],
                    associate_public_ip_address="true" if primary and args.associate_public_ip else None,
                    delete_on_termination="true",
                )
            )
        return out

    @staticmethod
    def _capacity(args: NodePoolArgs) -> aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs | None:
        target = args.capacity_block_id or args.capacity_reservation_id
        if target is None:
            return None
        return aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
            capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=target
            )
        )
