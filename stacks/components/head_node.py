"""Head (Slurm controller) and login nodes, and how an administrator reaches them.

The head and login pools are ordinary node pools in the head subnet. Admin access: with
``admin_cidrs`` listed, SSH (tcp/22) from exactly those CIDRs; with ``connection:
ssh-bastion``, a small bastion in the public subnet holds that rule instead and the nodes
accept SSH only from the bastion. No admin CIDRs (the default): no SSH ingress at all, SSM only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pulumi

from components import aws
from components.node_pool import NodeOutputs, NodePool, NodePoolArgs
from components.tags import with_name

BASTION_INSTANCE_TYPE = "t3.micro"


@dataclass(frozen=True)
class HeadNodeArgs:
    stack: str
    vpc_id: pulumi.Input[str]
    cluster_sg_id: pulumi.Input[str]
    pools: list[NodePoolArgs]  # the spec's head and login pools, already in the head subnet
    admin_cidrs: list[str]
    bastion: bool = False
    public_subnet_id: pulumi.Input[str] | None = None
    bastion_pool: NodePoolArgs | None = None  # template for the bastion (profile, image, tags)
    tags: dict[str, str] = field(default_factory=dict)


class HeadNode(pulumi.ComponentResource):
    nodes: list[NodeOutputs]
    bastion: NodeOutputs | None

    def __init__(self, name: str, args: HeadNodeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterforge:compute:HeadNode", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        stack, tags = args.stack, args.tags

        admin_sg = None
        if args.admin_cidrs:
            admin_sg = aws.ec2.SecurityGroup(
                f"{stack}-admin-ssh",
                vpc_id=args.vpc_id,
                description="clusterforge admin SSH from the spec's admin_cidrs only",
                tags=with_name(tags, f"{stack}-admin-ssh"),
                opts=child,
            )
            for i, cidr in enumerate(args.admin_cidrs):
                aws.vpc.SecurityGroupIngressRule(
                    f"{stack}-admin-ssh-{i}",
                    security_group_id=admin_sg.id,
                    cidr_ipv4=cidr,
                    ip_protocol="tcp",
                    from_port=22,
                    to_port=22,
                    description=f"SSH from admin CIDR {cidr}",
                    tags=tags,
                    opts=child,
                )

        self.bastion = None
        if args.bastion and args.bastion_pool is not None and args.public_subnet_id is not None:
            bastion_sg = aws.ec2.SecurityGroup(
                f"{stack}-bastion",
                vpc_id=args.vpc_id,
                description="clusterforge bastion: SSH out to the nodes",
                tags=with_name(tags, f"{stack}-bastion"),
                opts=child,
            )
            aws.vpc.SecurityGroupEgressRule(
                f"{stack}-bastion-to-nodes",
                security_group_id=bastion_sg.id,
                referenced_security_group_id=args.cluster_sg_id,
                ip_protocol="tcp",
                from_port=22,
                to_port=22,
                description="SSH to the cluster nodes",
                tags=tags,
                opts=child,
            )
            aws.vpc.SecurityGroupIngressRule(
                f"{stack}-nodes-ssh-from-bastion",
                security_group_id=args.cluster_sg_id,
                referenced_security_group_id=bastion_sg.id,
                ip_protocol="tcp",
                from_port=22,
                to_port=22,
                description="SSH from the bastion",
                tags=tags,
                opts=child,
            )
            groups = [bastion_sg.id] + ([admin_sg.id] if admin_sg is not None else [])
            bastion_args = replace(
                args.bastion_pool,
                pool="bastion",
                role="bastion",
                instance_type=BASTION_INSTANCE_TYPE,
                node_names=["bastion-001"],
                efa_interfaces=0,
                network_cards=1,
                subnet_id=args.public_subnet_id,
                security_group_ids=groups,
                root_volume=replace(
                    args.bastion_pool.root_volume, size_gib=16, type="gp3", iops=None, throughput_mibps=None
                ),
                placement_strategy=None,
                placement_group_name=None,
                launch_template_version=None,
                # An internet-facing host gets no instance role: nothing on it may reach the
                # checkpoint bucket or act as a node through SSM.
                instance_profile_name=None,
                capacity_reservation_id=None,
                capacity_block_id=None,
                associate_public_ip=True,
                certification=None,
            )
            self.bastion = NodePool(f"{stack}-bastion", bastion_args, opts=child).nodes[0]

        self.nodes = []
        for pool in args.pools:
            # Admin SSH lands on the head node only when there is no bastion to go through.
            extra = [admin_sg.id] if admin_sg is not None and not args.bastion else []
            pool_args = replace(pool, security_group_ids=[*pool.security_group_ids, *extra])
            self.nodes.extend(NodePool(f"{stack}-{pool.pool}", pool_args, opts=child).nodes)
        self.register_outputs({"nodes": [n.instance_id for n in self.nodes]})
