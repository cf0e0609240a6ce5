"""The AWS part of a bake against EC2's API: the builder launched from the pool's own launch template
with the base AMI, the AMI registered with its software digest (image and snapshot tags), found
again by that digest, the builder terminated. moto in process (its EC2 keeps templates, instances,
images and tag filters); the exact CreateImage request through botocore's Stubber, which checks it
against the service model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from clusterforge.images.aws import TAG_DIGEST, TAG_POOL, TAG_ROLE, TAG_STACK, AwsBuilder
from clusterforge.images.digest import SoftwareDigest
from clusterforge.providers.base import Node, ProviderError
from clusterforge.spec.loader import REPO_ROOT, load_spec
from clusterforge.spec.models import ClusterSpec

DIGEST = SoftwareDigest("0123456789abcdef", {"base": "ami-x"}, {"nvidia_driver_version": "570.133.20"})
OUTPUTS = {"transfer_bucket": "dev-ssm-transfer", "ami": "ami-0fedcba9876543210"}


@pytest.fixture
def fake_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture(scope="module")
def dev() -> ClusterSpec:
    return load_spec(REPO_ROOT / "stacks" / "dev.yaml")[0]


class OnlineSsm:
    """SSM's DescribeInstanceInformation as the agent reports once it registered."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def describe_instance_information(self, Filters: list[dict[str, Any]]) -> dict[str, Any]:
        self.asked += Filters[0]["Values"]
        return {"InstanceInformationList": [{"InstanceId": Filters[0]["Values"][0], "PingStatus": "Online"}]}


class MotoGap:
    """moto's CreateImage raises NotImplementedError on snapshot tags (moto/ec2/models/amis.py),
    which EC2 takes: they are dropped on the way to moto only; the Stubber test below pins the
    request EC2 gets, snapshot tags included."""

    def __init__(self, ec2: Any) -> None:
        self._ec2 = ec2

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ec2, name)

    def create_image(self, **kwargs: Any) -> Any:
        specs = [s for s in kwargs.pop("TagSpecifications") if s["ResourceType"] != "snapshot"]
        return self._ec2.create_image(TagSpecifications=specs, **kwargs)


def _pool(spec: ClusterSpec) -> str:
    return next(p.name for p in spec.node_pools if p.role == "gpu")


@pytest.mark.slow
def test_bake_round_trip_on_moto(dev: ClusterSpec, fake_credentials: None) -> None:
    from moto import mock_aws

    pool = _pool(dev)
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=dev.provider.region)  # type: ignore[union-attr]
        base = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        template = ec2.create_launch_template(
            LaunchTemplateName=f"{dev.stack}-{pool}-x",
            LaunchTemplateData={"ImageId": base, "InstanceType": "t3.micro"},
            TagSpecifications=[
                {
                    "ResourceType": "launch-template",
                    "Tags": [{"Key": TAG_STACK, "Value": dev.stack}, {"Key": TAG_POOL, "Value": pool}],
                }
            ],
        )["LaunchTemplate"]["LaunchTemplateId"]
        ssm = OnlineSsm()
        builder = AwsBuilder(MotoGap(ec2), ssm, OUTPUTS, sleep=lambda _s: None)
        assert builder.launch_template(dev, pool) == template
        assert builder.existing(dev, pool, DIGEST) is None
        lines: list[str] = []
        node = builder.start(dev, pool, base, lines.append)
        assert node.provider_id.startswith("i-") and node.pool == pool and ssm.asked == [node.provider_id]
        assert node.connection["ansible_connection"] == "amazon.aws.aws_ssm"
        assert node.connection["ansible_aws_ssm_bucket_name"] == "dev-ssm-transfer"
        described = ec2.describe_instances(InstanceIds=[node.provider_id])["Reservations"][0]["Instances"][0]
        assert described["ImageId"] == base
        tags = {t["Key"]: t["Value"] for t in described["Tags"]}
        assert tags[TAG_ROLE] == "image-builder" and tags[TAG_STACK] == dev.stack
        ami = builder.register(dev, pool, node, DIGEST)
        image = ec2.describe_images(ImageIds=[ami])["Images"][0]
        assert {t["Key"]: t["Value"] for t in image["Tags"]}[TAG_DIGEST] == DIGEST.digest
        assert image["Name"] == f"clusterforge-{dev.stack}-{pool}-{DIGEST.digest}"
        # Baked once: the same digest finds the same AMI; another digest does not.
        assert builder.existing(dev, pool, DIGEST) == ami
        assert builder.existing(dev, pool, SoftwareDigest("f" * 16)) is None
        builder.discard(dev, node)
        state = ec2.describe_instances(InstanceIds=[node.provider_id])["Reservations"][0]["Instances"][0][
            "State"
        ]
        assert state["Name"] in ("shutting-down", "terminated")


def test_no_launch_template_yet_says_to_bring_the_stack_up(dev: ClusterSpec) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
    with Stubber(ec2) as stub:
        stub.add_response("describe_launch_templates", {"LaunchTemplates": []})
        with pytest.raises(ProviderError, match=r"no launch template for pool .*invoke up"):
            AwsBuilder(ec2, OnlineSsm(), OUTPUTS).launch_template(dev, _pool(dev))


def test_create_image_request_tags_image_and_snapshots_with_the_digest(dev: ClusterSpec) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="t", aws_secret_access_key="t")
    pool = _pool(dev)
    node = Node(f"{pool}-bake", "10.0.0.9", pool, "gpu", "p5.48xlarge", {}, provider_id="i-0123456789abcdef0")
    tags = [
        {"Key": TAG_STACK, "Value": dev.stack},
        {"Key": TAG_POOL, "Value": pool},
        {"Key": TAG_DIGEST, "Value": DIGEST.digest},
        {"Key": "Name", "Value": f"{dev.stack}-{pool}-baked"},
    ]
    with Stubber(ec2) as stub:
        stub.add_response(
            "create_image",
            {"ImageId": "ami-0123456789abcdef0"},
            {
                "InstanceId": "i-0123456789abcdef0",
                "Name": f"clusterforge-{dev.stack}-{pool}-{DIGEST.digest}",
                "Description": ANY,
                "NoReboot": False,
                "TagSpecifications": [
                    {"ResourceType": "image", "Tags": tags},
                    {"ResourceType": "snapshot", "Tags": tags},
                ],
            },
        )
        stub.add_response(
            "describe_images",
            {"Images": [{"ImageId": "ami-0123456789abcdef0", "State": "available"}]},
            {"ImageIds": ["ami-0123456789abcdef0"]},
        )
        assert (
            AwsBuilder(ec2, OnlineSsm(), OUTPUTS).register(dev, pool, node, DIGEST) == "ami-0123456789abcdef0"
        )
        stub.assert_no_pending_responses()


def test_the_base_is_the_specs_ami_else_the_stacks(dev: ClusterSpec) -> None:
    builder = AwsBuilder(None, None, OUTPUTS)
    assert builder.base(dev) == (dev.provider.ami or OUTPUTS["ami"])  # type: ignore[union-attr]
    pinned = dev.model_copy(
        update={"provider": dev.provider.model_copy(update={"ami": "ami-0aaaaaaaaaaaaaaaa"})}
    )
    assert builder.base(pinned) == "ami-0aaaaaaaaaaaaaaaa"
    unpinned = dev.model_copy(update={"provider": dev.provider.model_copy(update={"ami": None})})
    with pytest.raises(ProviderError, match="no base AMI yet"):
        AwsBuilder(None, None, {}).base(unpinned)
