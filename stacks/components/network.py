"""The cluster network: VPC, private subnets, egress, and the cluster security group.

GPU nodes live in one private subnet in the spec's availability zone (GPU capacity is per AZ);
head and login nodes in a second. Egress is a NAT gateway or VPC endpoints only, as the spec
says; either way an S3 gateway endpoint carries S3 traffic (checkpoints), which through a NAT
gateway would pay its per-GB processing charge, and costs nothing itself. The cluster security group allows all traffic in and out, but only to itself: EFA's
OS-bypass traffic needs exactly that, and nothing reaches the nodes from outside.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from components import aws
from components.tags import with_name

# Interface endpoints that SSM Session Manager needs when there is no NAT gateway.
SSM_ENDPOINTS = ("ssm", "ssmmessages", "ec2messages")
# Egress on these ports to the internet (package mirrors) when egress is a NAT gateway.
INTERNET_EGRESS_PORTS = (80, 443)


@dataclass(frozen=True)
class NetworkArgs:
    stack: str
    region: str
    availability_zone: str
    vpc_cidr: str
    gpu_subnet_cidr: str
    head_subnet_cidr: str
    public_subnet_cidr: str | None
    egress: str  # "nat" | "endpoints"
    # A public subnet is also needed for an SSH bastion, whatever the egress.
    needs_public_subnet: bool = False
    tags: dict[str, str] = field(default_factory=dict)


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    gpu_subnet_id: pulumi.Output[str]
    head_subnet_id: pulumi.Output[str]
    public_subnet_id: pulumi.Output[str] | None
    cluster_sg_id: pulumi.Output[str]
    egress_sg_id: pulumi.Output[str]

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterforge:network:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = args.tags
        stack = args.stack

        vpc = aws.ec2.Vpc(
            f"{stack}-vpc",
            cidr_block=args.vpc_cidr,
            enable_dns_hostnames=True,  # interface endpoints' private DNS and FSx need both
            enable_dns_support=True,
            tags=with_name(tags, f"{stack}-vpc"),
            opts=child,
        )
        gpu_subnet = self._subnet(f"{stack}-gpu", vpc, args.gpu_subnet_cidr, args, child)
        head_subnet = self._subnet(f"{stack}-head", vpc, args.head_subnet_cidr, args, child)
        private_rt = aws.ec2.RouteTable(
            f"{stack}-private", vpc_id=vpc.id, tags=with_name(tags, f"{stack}-private"), opts=child
        )
        for label, subnet in (("gpu", gpu_subnet), ("head", head_subnet)):
            aws.ec2.RouteTableAssociation(
                f"{stack}-{label}-private", subnet_id=subnet.id, route_table_id=private_rt.id, opts=child
            )

        public_subnet = None
        if args.egress == "nat" or args.needs_public_subnet:
            if args.public_subnet_cidr is None:
                raise ValueError(
                    "network.subnets.public is null but a public subnet is needed "
                    f"(egress: {args.egress}); set network.subnets.public to a CIDR inside the VPC"
                )
            public_subnet = self._public(vpc, args, child)
        if args.egress == "nat" and public_subnet is not None:
            eip = aws.ec2.Eip(f"{stack}-nat", domain="vpc", tags=with_name(tags, f"{stack}-nat"), opts=child)
            nat = aws.ec2.NatGateway(
                f"{stack}-nat",
                allocation_id=eip.id,
                subnet_id=public_subnet.id,
                tags=with_name(tags, f"{stack}-nat"),
                opts=child,
            )
            aws.ec2.Route(
                f"{stack}-private-default",
                route_table_id=private_rt.id,
                destination_cidr_block="0.0.0.0/0",
                nat_gateway_id=nat.id,
                opts=child,
            )

        cluster_sg = aws.ec2.SecurityGroup(
            f"{stack}-cluster",
            vpc_id=vpc.id,
            description="clusterforge nodes: all traffic to and from this group only (EFA needs it)",
            tags=with_name(tags, f"{stack}-cluster"),
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{stack}-cluster-self-in",
            security_group_id=cluster_sg.id,
            referenced_security_group_id=cluster_sg.id,
            ip_protocol="-1",
            description="all traffic from the cluster itself",
            tags=tags,
            opts=child,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{stack}-cluster-self-out",
            security_group_id=cluster_sg.id,
            referenced_security_group_id=cluster_sg.id,
            ip_protocol="-1",
            description="all traffic to the cluster itself",
            tags=tags,
            opts=child,
        )

        egress_sg = aws.ec2.SecurityGroup(
            f"{stack}-egress",
            vpc_id=vpc.id,
            description="clusterforge nodes: outbound HTTPS (packages, AWS APIs); no inbound",
            tags=with_name(tags, f"{stack}-egress"),
            opts=child,
        )
        if args.egress == "nat":
            for port in INTERNET_EGRESS_PORTS:
                aws.vpc.SecurityGroupEgressRule(
                    f"{stack}-egress-{port}",
                    security_group_id=egress_sg.id,
                    cidr_ipv4="0.0.0.0/0",
                    ip_protocol="tcp",
                    from_port=port,
                    to_port=port,
                    description=f"outbound tcp/{port} through the NAT gateway",
                    tags=tags,
                    opts=child,
                )
        else:
            self._endpoints(vpc, head_subnet, egress_sg, args, child)
        self._s3_gateway(vpc, private_rt, egress_sg, args, child)

        self.vpc_id = vpc.id
        self.gpu_subnet_id = gpu_subnet.id
        self.head_subnet_id = head_subnet.id
        self.public_subnet_id = public_subnet.id if public_subnet is not None else None
        self.cluster_sg_id = cluster_sg.id
        self.egress_sg_id = egress_sg.id
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "gpu_subnet_id": self.gpu_subnet_id,
                "head_subnet_id": self.head_subnet_id,
                "cluster_sg_id": self.cluster_sg_id,
            }
        )

    @staticmethod
    def _subnet(
        name: str, vpc: aws.ec2.Vpc, cidr: str, args: NetworkArgs, opts: pulumi.ResourceOptions
    ) -> aws.ec2.Subnet:
        return aws.ec2.Subnet(
            name,
            vpc_id=vpc.id,
            cidr_block=cidr,
            availability_zone=args.availability_zone,
            map_public_ip_on_launch=False,
            tags=with_name(args.tags, name),
            opts=opts,
        )

    def _public(self, vpc: aws.ec2.Vpc, args: NetworkArgs, opts: pulumi.ResourceOptions) -> aws.ec2.Subnet:
        stack, tags = args.stack, args.tags
        igw = aws.ec2.InternetGateway(
            f"{stack}-igw", vpc_id=vpc.id, tags=with_name(tags, f"{stack}-igw"), opts=opts
        )
        subnet = aws.ec2.Subnet(
            f"{stack}-public",
            vpc_id=vpc.id,
            cidr_block=args.public_subnet_cidr,
            availability_zone=args.availability_zone,
            map_public_ip_on_launch=False,  # only the bastion asks for a public address
            tags=with_name(tags, f"{stack}-public"),
            opts=opts,
        )
        rt = aws.ec2.RouteTable(
            f"{stack}-public", vpc_id=vpc.id, tags=with_name(tags, f"{stack}-public"), opts=opts
        )
        aws.ec2.Route(
            f"{stack}-public-default",
            route_table_id=rt.id,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=igw.id,
            opts=opts,
        )
        aws.ec2.RouteTableAssociation(f"{stack}-public", subnet_id=subnet.id, route_table_id=rt.id, opts=opts)
        return subnet

    @staticmethod
    def _s3_gateway(
        vpc: aws.ec2.Vpc,
        private_rt: aws.ec2.RouteTable,
        egress_sg: aws.ec2.SecurityGroup,
        args: NetworkArgs,
        opts: pulumi.ResourceOptions,
    ) -> None:
        """S3 through a gateway endpoint on the private route table, in every egress mode."""
        stack, tags = args.stack, args.tags
        s3 = aws.ec2.VpcEndpoint(
            f"{stack}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[private_rt.id],
            tags=with_name(tags, f"{stack}-s3"),
            opts=opts,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{stack}-egress-s3-https",
            security_group_id=egress_sg.id,
            prefix_list_id=s3.prefix_list_id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            description="HTTPS to S3 through the gateway endpoint",
            tags=tags,
            opts=opts,
        )

    @staticmethod
    def _endpoints(
        vpc: aws.ec2.Vpc,
        subnet: aws.ec2.Subnet,
        egress_sg: aws.ec2.SecurityGroup,
        args: NetworkArgs,
        opts: pulumi.ResourceOptions,
    ) -> None:
        """No NAT: the interface endpoints SSM needs (S3's gateway is made in every mode)."""
        stack, tags = args.stack, args.tags
        endpoint_sg = aws.ec2.SecurityGroup(
            f"{stack}-endpoints",
            vpc_id=vpc.id,
            description="clusterforge VPC interface endpoints: HTTPS from inside the VPC",
            tags=with_name(tags, f"{stack}-endpoints"),
            opts=opts,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{stack}-endpoints-https",
            security_group_id=endpoint_sg.id,
            cidr_ipv4=args.vpc_cidr,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            description="HTTPS from the VPC",
            tags=tags,
            opts=opts,
        )
        aws.vpc.SecurityGroupEgressRule(
            f"{stack}-egress-vpc-https",
            security_group_id=egress_sg.id,
            cidr_ipv4=args.vpc_cidr,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            description="HTTPS to the interface endpoints",
            tags=tags,
            opts=opts,
        )
        for service in SSM_ENDPOINTS:
            aws.ec2.VpcEndpoint(
                f"{stack}-{service}",
                vpc_id=vpc.id,
                service_name=f"com.amazonaws.{args.region}.{service}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=[subnet.id],
                security_group_ids=[endpoint_sg.id],
                tags=with_name(tags, f"{stack}-{service}"),
                opts=opts,
            )
