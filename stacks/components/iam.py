"""The node instance role: SSM core access (Session Manager, Run Command) and the checkpoint
bucket, nothing else. Nodes never get account-wide S3 or EC2 rights. The SSM transfer bucket
needs no node rights: the aws_ssm connection hands the node presigned URLs signed by the
workstation's credentials (amazon.aws plugin_utils/ssm/s3clientmanager.py, generate_presigned_url
for get_object/put_object)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi

from components import aws
from components.tags import with_name

SSM_CORE_POLICY = "AmazonSSMManagedInstanceCore"
# Object actions a training job needs for checkpoints (multipart uploads for large shards).
BUCKET_OBJECT_ACTIONS = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)
BUCKET_ACTIONS = ("s3:ListBucket", "s3:GetBucketLocation", "s3:ListBucketMultipartUploads")


def partition_of(region: str) -> str:
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    if region.startswith("cn-"):
        return "aws-cn"
    return "aws"


def bucket_policy_document(bucket_arn: str) -> str:
    """Least privilege on one bucket: list it, read and write its objects."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "ListCheckpointBucket",
                    "Effect": "Allow",
                    "Action": list(BUCKET_ACTIONS),
                    "Resource": bucket_arn,
                },
                {
                    "Sid": "CheckpointObjects",
                    "Effect": "Allow",
                    "Action": list(BUCKET_OBJECT_ACTIONS),
                    "Resource": f"{bucket_arn}/*",
                },
            ],
        },
        sort_keys=True,
    )


# EC2's service principal per partition: China's differs (the EKS node group CloudFormation
# template's PartitionMap: aws-cn -> ec2.amazonaws.com.cn).
EC2_PRINCIPALS = {
    "aws": "ec2.amazonaws.com",
    "aws-us-gov": "ec2.amazonaws.com",
    "aws-cn": "ec2.amazonaws.com.cn",
}


def assume_ec2(region: str) -> str:
    principal = EC2_PRINCIPALS[partition_of(region)]
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"Service": principal}, "Action": "sts:AssumeRole"}
            ],
        }
    )


@dataclass(frozen=True)
class NodeIamArgs:
    stack: str
    region: str
    bucket_arn: pulumi.Input[str] | None
    tags: dict[str, str] = field(default_factory=dict)


class NodeIam(pulumi.ComponentResource):
    instance_profile_name: pulumi.Output[str]
    role_arn: pulumi.Output[str]

    def __init__(self, name: str, args: NodeIamArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("clusterforge:iam:NodeIam", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        stack = args.stack
        role = aws.iam.Role(
            f"{stack}-node",
            assume_role_policy=assume_ec2(args.region),
            description=f"clusterforge {stack} nodes: SSM core and the checkpoint bucket",
            tags=with_name(args.tags, f"{stack}-node"),
            opts=child,
        )
        aws.iam.RolePolicyAttachment(
            f"{stack}-node-ssm",
            role=role.name,
            policy_arn=f"arn:{partition_of(args.region)}:iam::aws:policy/{SSM_CORE_POLICY}",
            opts=child,
        )
        if args.bucket_arn is not None:
            aws.iam.RolePolicy(
                f"{stack}-node-checkpoints",
                role=role.id,
                policy=pulumi.Output.from_input(args.bucket_arn).apply(bucket_policy_document),
                opts=child,
            )
        profile = aws.iam.InstanceProfile(
            f"{stack}-node", role=role.name, tags=with_name(args.tags, f"{stack}-node"), opts=child
        )
        self.instance_profile_name = profile.name
        self.role_arn = role.arn
        self.register_outputs({"instance_profile_name": profile.name, "role_arn": role.arn})
