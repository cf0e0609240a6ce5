"""The AWS part of a bake: a builder instance from the pool's own launch template, made an AMI.

- The builder is launched from the pool's launch template (found by its tags
  ``clusterforge:stack``/``clusterforge:pool``: same instance type, subnet, security groups, IAM
  profile, EFA interfaces and metadata options as the pool's nodes), with the base AMI as ImageId
  and tags that name it a builder. So the stack must have been brought up once (`invoke up`)
  before a pool can be baked; the node software converges on the same hardware it will run on,
  and the single-node checks judge it there.
- The AMI is registered with ``CreateImage`` (the instance is rebooted for a consistent file
  system, NoReboot false), tagged with the stack, pool and software digest on the image and its
  snapshots, and waited for (``image_available``). ``existing`` finds an AMI of this account with
  the same digest tag, so a second bake of unchanged software registers nothing.
- The builder is terminated whatever happened.

Written against boto3's EC2 API (tested at that seam with botocore's Stubber and moto); launching
for real needs an AWS account, which this machine has not.
"""

from __future__ import annotations

import time
from typing import Any

from clusterforge.images.digest import SoftwareDigest
from clusterforge.providers.aws.inventory import connection_vars
from clusterforge.providers.base import Node, ProviderError
from clusterforge.spec.models import AwsProvider, ClusterSpec

TAG_STACK = "clusterforge:stack"
TAG_POOL = "clusterforge:pool"
TAG_ROLE = "clusterforge:role"
TAG_DIGEST = "clusterforge:software-digest"
BUILDER_ROLE = "image-builder"
# AMI names: 3-128 characters of letters, digits, ( ) [ ] space . / - ' @ _ (EC2 API, RegisterImage).
IMAGE_NAME = "clusterforge-{stack}-{pool}-{digest}"
# CreateImage of a p5's root volume: minutes; the waiter polls every 15 s.
IMAGE_WAIT = {"Delay": 15, "MaxAttempts": 240}
SSM_ONLINE_TIMEOUT_S = 900.0


class AwsBuilder:
    kind = "aws"

    def __init__(self, ec2: Any, ssm: Any, outputs: dict[str, Any], sleep: Any = time.sleep):
        self.ec2 = ec2
        self.ssm = ssm
        self.outputs = outputs
        self.sleep = sleep

    # -- what the image starts from and whether it exists ---------------------------------

    def base(self, spec: ClusterSpec) -> str:
        """The spec's AMI, else the one the stack's nodes booted (stack output ``ami``)."""
        provider = spec.provider
        if isinstance(provider, AwsProvider) and provider.ami:
            return provider.ami
        ami = self.outputs.get("ami")
        if not ami:
            raise ProviderError(
                f"stack {spec.stack!r} has no base AMI yet: bring it up once (`invoke up`) or set provider.ami"
            )
        return str(ami)

    def existing(self, spec: ClusterSpec, pool: str, software: SoftwareDigest) -> str | None:
        images = self.ec2.describe_images(
            Owners=["self"],
            Filters=[
                {"Name": f"tag:{TAG_STACK}", "Values": [spec.stack]},
                {"Name": f"tag:{TAG_DIGEST}", "Values": [software.digest]},
                {"Name": "state", "Values": ["available"]},
            ],
        ).get("Images", [])
        newest = sorted(images, key=lambda i: i.get("CreationDate", ""), reverse=True)
        return str(newest[0]["ImageId"]) if newest else None

    # -- the builder ----------------------------------------------------------------------

    def launch_template(self, spec: ClusterSpec, pool: str) -> str:
        found = self.ec2.describe_launch_templates(
            Filters=[
                {"Name": f"tag:{TAG_STACK}", "Values": [spec.stack]},
                {"Name": f"tag:{TAG_POOL}", "Values": [pool]},
            ]
        ).get("LaunchTemplates", [])
        if not found:
            raise ProviderError(
                f"stack {spec.stack!r} has no launch template for pool {pool!r} yet: bring the stack up once "
                "(`invoke up`), then bake"
            )
        return str(found[0]["LaunchTemplateId"])

    def start(self, spec: ClusterSpec, pool: str, base: str, progress: Any) -> Node:
        template = self.launch_template(spec, pool)
        p = spec.pool(pool)
        name = f"{pool}-bake"
        tags = [
            {"Key": "Name", "Value": f"{spec.stack}-bake-{pool}"},
            {"Key": TAG_STACK, "Value": spec.stack},
            {"Key": TAG_POOL, "Value": pool},
            {"Key": TAG_ROLE, "Value": BUILDER_ROLE},
        ]
        reply = self.ec2.run_instances(
            LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
            ImageId=base,
            MinCount=1,
            MaxCount=1,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )
        instance = reply["Instances"][0]
        instance_id = str(instance["InstanceId"])
        progress(f"pool {pool}: builder {instance_id} launched from {template}; waiting for it and for SSM")
        self.ec2.get_waiter("instance_running").wait(InstanceIds=[instance_id])
        described = self.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
        address = str(described.get("PrivateIpAddress", ""))
        if spec.provider.kind == "aws" and getattr(spec.provider, "connection", "ssm") == "ssm":
            self.wait_ssm(instance_id)
        node = {"instance_id": instance_id, "private_ip": address}
        return Node(
            name=name,
            address=address,
            pool=pool,
            role=p.role,
            instance_type=p.instance_type,
            connection=connection_vars(spec, self.outputs, node),
            provider_id=instance_id,
        )

    def wait_ssm(self, instance_id: str) -> None:
        """Until the instance's SSM agent is Online (Ansible's aws_ssm connection needs it)."""
        deadline = time.monotonic() + SSM_ONLINE_TIMEOUT_S
        while True:
            info = self.ssm.describe_instance_information(
                Filters=[{"Key": "InstanceIds", "Values": [instance_id]}]
            ).get("InstanceInformationList", [])
            if info and info[0].get("PingStatus") == "Online":
                return
            if time.monotonic() > deadline:
                raise ProviderError(
                    f"builder {instance_id}: its SSM agent was not Online within {SSM_ONLINE_TIMEOUT_S:.0f} s "
                    "(instance profile, VPC endpoints or NAT)"
                )
            self.sleep(10)

    def register(self, spec: ClusterSpec, pool: str, node: Node, software: SoftwareDigest) -> str:
        tags = [
            {"Key": TAG_STACK, "Value": spec.stack},
            {"Key": TAG_POOL, "Value": pool},
            {"Key": TAG_DIGEST, "Value": software.digest},
            {"Key": "Name", "Value": f"{spec.stack}-{pool}-baked"},
        ]
        reply = self.ec2.create_image(
            InstanceId=node.provider_id,
            Name=IMAGE_NAME.format(stack=spec.stack, pool=pool, digest=software.digest),
            Description=f"clusterforge {spec.stack} pool {pool}: node software digest {software.digest}",
            NoReboot=False,
            TagSpecifications=[
                {"ResourceType": "image", "Tags": tags},
                {"ResourceType": "snapshot", "Tags": tags},
            ],
        )
        image_id = str(reply["ImageId"])
        self.ec2.get_waiter("image_available").wait(ImageIds=[image_id], WaiterConfig=IMAGE_WAIT)
        return image_id

    def discard(self, spec: ClusterSpec, node: Node) -> None:
        if node.provider_id:
            self.ec2.terminate_instances(InstanceIds=[node.provider_id])


def aws_builder(spec: ClusterSpec) -> AwsBuilder:
    """The builder for an AWS stack: boto3 clients of its region, its stack outputs (transfer bucket)."""
    import boto3

    from clusterforge.providers.aws.provider import AwsStackProvider

    provider = spec.provider
    if not isinstance(provider, AwsProvider):
        raise ValueError(f"stack {spec.stack!r} is not an AWS stack")
    outputs = AwsStackProvider(spec).stack_outputs(spec)
    session = boto3.session.Session(region_name=provider.region)
    return AwsBuilder(session.client("ec2"), session.client("ssm"), dict(outputs or {}))
