"""Wire the components from one spec: network, storage, IAM, head node, one pool per GPU pool.

``build_cluster`` is the whole program; ``__main__.py`` only loads the spec and exports what
this returns. Everything a component needs arrives as typed values taken from the spec and the
hardware catalogue here, so components never read configuration themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from clusterforge.catalog import load_hardware
from clusterforge.providers.aws.images import AMI_PARAMETERS, ROOT_DEVICES
from clusterforge.spec.models import AwsProvider, ClusterSpec
from clusterforge.spec.models import NodePool as PoolSpec
from components import aws
from components.head_node import HeadNode, HeadNodeArgs
from components.iam import NodeIam, NodeIamArgs
from components.network import Network, NetworkArgs
from components.node_pool import NodeOutputs, NodePool, NodePoolArgs, RootVolumeArgs
from components.storage import BucketArgs, FsxArgs, Storage, StorageArgs
from components.tags import base_tags


@dataclass
class Cluster:
    """What the program made, for exports and tests."""

    network: Network
    storage: Storage
    iam: NodeIam
    head: HeadNode
    pools: list[NodePool]
    image: pulumi.Input[str]  # the AMI the nodes boot (exported: the provider records it)

    @property
    def nodes(self) -> list[NodeOutputs]:
        return self.head.nodes + [n for pool in self.pools for n in pool.nodes]


def aws_provider(spec: ClusterSpec) -> AwsProvider:
    if not isinstance(spec.provider, AwsProvider):
        raise ValueError(
            f"stack {spec.stack!r}: provider.kind is {spec.provider.kind!r}; the Pulumi program needs 'aws'"
        )
    return spec.provider


def image_id(spec: ClusterSpec, recorded_ami: str | None = None) -> pulumi.Input[str]:
    """The AMI the nodes boot: the spec's, else the one recorded on the first run, else (first
    run only) the SSM parameter's current value. The parameter moves with every image release;
    read on every run, it would make a new template version and so replace every node."""
    provider = aws_provider(spec)
    if provider.ami:
        return provider.ami
    if recorded_ami:
        return recorded_ami
    return aws.ssm.get_parameter_output(name=AMI_PARAMETERS[spec.software.os_image]).value


def _pool_args(
    spec: ClusterSpec,
    pool: PoolSpec,
    subnet_id: pulumi.Input[str],
    security_group_ids: Sequence[pulumi.Input[str]],
    network: Network,
    iam: NodeIam,
    image: pulumi.Input[str],
) -> NodePoolArgs:
    hw = load_hardware()
    if pool.instance_type not in hw:
        raise ValueError(
            f"node_pools[{pool.name}].instance_type: {pool.instance_type!r} is not in the hardware catalogue; "
            f"known: {', '.join(hw.names('aws'))}"
        )
    it = hw[pool.instance_type]
    placement = pool.placement_group
    return NodePoolArgs(
        stack=spec.stack,
        pool=pool.name,
        role=pool.role,
        instance_type=pool.instance_type,
        node_names=spec.node_names(pool),
        efa_interfaces=it.network.efa_interfaces,
        network_cards=it.network.network_cards,
        subnet_id=subnet_id,
        security_group_ids=security_group_ids,
        cluster_sg_id=network.cluster_sg_id,
        instance_profile_name=iam.instance_profile_name,
        image_id=image,
        root_volume=RootVolumeArgs(
            size_gib=pool.root_volume.size_gib,
            device_name=ROOT_DEVICES[spec.software.os_image],
            type=pool.root_volume.type,
            iops=pool.root_volume.iops,
            throughput_mibps=pool.root_volume.throughput_mibps,
        ),
        placement_strategy=placement.strategy if placement else None,
        partition_count=placement.partition_count if placement else None,
        placement_group_name=placement.name if placement else None,
        launch_template_version=pool.launch_template_version,
        capacity_reservation_id=pool.capacity_reservation_id,
        capacity_block_id=pool.capacity_block_id,
        key_name=aws_provider(spec).key_name,
        certification=pool.certification,
        tags=base_tags(spec.stack),
    )


def build_cluster(
    spec: ClusterSpec,
    recorded_ami: str | None = None,
    allow_replace: frozenset[str] = frozenset(),
    pool_images: dict[str, str] | None = None,
) -> Cluster:
    """The whole program; ``recorded_ami`` is the stack config's ``clusterforge:ami``;
    ``allow_replace`` names data-holding resources this run may replace (``clusterforge:allow-replace``,
    set by the driver only for an `invoke up --allow-replace NAME`): everything else is protected;
    ``pool_images`` the AMI each pool with ``image: baked`` boots (`invoke image.bake`)."""
    provider = aws_provider(spec)
    stack = spec.stack
    tags = base_tags(stack)
    subnets = spec.network.subnets
    bastion = provider.connection == "ssh-bastion"

    network = Network(
        stack,
        NetworkArgs(
            stack=stack,
            region=provider.region,
            availability_zone=provider.availability_zone,
            vpc_cidr=str(spec.network.vpc_cidr),
            gpu_subnet_cidr=str(subnets.gpu),
            head_subnet_cidr=str(subnets.head),
            public_subnet_cidr=str(subnets.public) if subnets.public else None,
            egress=provider.egress,
            needs_public_subnet=bastion,
            tags=tags,
        ),
    )
    fsx = spec.storage.fsx_lustre
    bucket = spec.storage.checkpoint_bucket
    storage = Storage(
        stack,
        StorageArgs(
            stack=stack,
            vpc_id=network.vpc_id,
            subnet_id=network.gpu_subnet_id,
            client_sg_id=network.cluster_sg_id,
            fsx=FsxArgs(
                storage_capacity_gib=fsx.storage_capacity_gib,
                deployment_type=fsx.deployment_type,
                per_unit_storage_throughput=fsx.per_unit_storage_throughput,
                mount_point=fsx.mount_point,
                import_path=fsx.import_path,
                automatic_backup_retention_days=fsx.automatic_backup_retention_days,
                protect=f"{stack}-fsx" not in allow_replace,
            )
            if fsx
            else None,
            bucket=BucketArgs(
                name=bucket.name,
                noncurrent_version_expiry_days=bucket.noncurrent_version_expiry_days,
                protect=f"{stack}-checkpoints" not in allow_replace,
            )
            if bucket
            else None,
            transfer_bucket=provider.connection == "ssm",
            tags=tags,
        ),
    )
    iam = NodeIam(
        stack,
        NodeIamArgs(
            stack=stack,
            region=provider.region,
            bucket_arn=storage.bucket_arn,
            tags=tags,
        ),
    )
    image = image_id(spec, recorded_ami)
    node_groups = [network.cluster_sg_id, network.egress_sg_id]

    head_pools = [
        _pool_args(spec, p, network.head_subnet_id, node_groups, network, iam, image)
        for p in spec.node_pools
        if p.role in ("head", "login")
    ]
    head = HeadNode(
        stack,
        HeadNodeArgs(
            stack=stack,
            vpc_id=network.vpc_id,
            cluster_sg_id=network.cluster_sg_id,
            pools=head_pools,
            admin_cidrs=[str(c) for c in provider.admin_cidrs],
            bastion=bastion,
            public_subnet_id=network.public_subnet_id,
            bastion_pool=head_pools[0] if head_pools else None,
            tags=tags,
        ),
    )
    pools = [
        NodePool(
            f"{stack}-{p.name}",
            _pool_args(
                spec,
                p,
                network.gpu_subnet_id,
                node_groups,
                network,
                iam,
                (pool_images or {}).get(p.name, image),
            ),
        )
        for p in spec.node_pools
        if p.role == "gpu"
    ]
    return Cluster(network=network, storage=storage, iam=iam, head=head, pools=pools, image=image)


def node_record(node: NodeOutputs) -> pulumi.Output[dict[str, Any]]:
    """One node as the stack exports it (the provider ``Node`` shape, before connection vars)."""
    return pulumi.Output.all(node.instance_id, node.private_ip, node.availability_zone).apply(
        lambda v: {
            "name": node.name,
            "pool": node.pool,
            "role": node.role,
            "instance_type": node.instance_type,
            "instance_id": v[0],
            "private_ip": v[1],
            "availability_zone": v[2],
        }
    )


def export_cluster(spec: ClusterSpec, cluster: Cluster) -> dict[str, Any]:
    """The stack outputs ``clusterforge.providers.aws.inventory`` reads."""
    provider = aws_provider(spec)
    fsx = spec.storage.fsx_lustre
    bastion = cluster.head.bastion
    return {
        "region": provider.region,
        "availability_zone": provider.availability_zone,
        "connection": provider.connection,
        "nodes": [node_record(n) for n in cluster.nodes],
        "fsx": {
            "id": cluster.storage.fsx_id,
            "dns_name": cluster.storage.fsx_dns_name,
            "mount_name": cluster.storage.fsx_mount_name,
            "mount_point": fsx.mount_point,
        }
        if fsx
        else None,
        "bucket": cluster.storage.bucket_name,
        "transfer_bucket": cluster.storage.transfer_bucket_name,
        "bastion": bastion.public_ip if bastion is not None else None,
        "ami": cluster.image,
    }
