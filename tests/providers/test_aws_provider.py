"""The AWS provider behind the Provider protocol, with the Automation API faked at its seam."""

from __future__ import annotations

from typing import Any

from clusterforge.providers import get_provider
from clusterforge.providers.aws.automation import Change, PreviewSummary
from clusterforge.providers.aws.provider import AwsStackProvider
from clusterforge.spec.loader import load_spec, stack_path


class FakeDriver:
    def __init__(self, stack: str) -> None:
        self.stack = stack
        self.on_output = None
        self.confirmed: list[str] = []

    def preview(self) -> PreviewSummary:
        inst = "aws:ec2/instance:Instance"
        return PreviewSummary(
            self.stack, [Change("create", inst, "gpu-002"), Change("update", inst, "gpu-001")]
        )

    def up(
        self, allow_replace: frozenset[str] = frozenset(), replace: list[str] | None = None
    ) -> dict[str, Any]:
        self.allowed = allow_replace
        return self.outputs()

    def ensure_ami(self, resolve) -> None:
        self.recorded = resolve()

    def outputs(self) -> dict[str, Any]:
        node = {"pool": "gpu", "role": "gpu", "instance_type": "g5.xlarge", "availability_zone": "us-west-2a"}
        return {
            "bucket": "b",
            "transfer_bucket": "t",
            "nodes": [
                {**node, "name": "gpu-001", "instance_id": "i-01", "private_ip": "10.0.0.5"},
                {**node, "name": "gpu-002", "instance_id": "i-02", "private_ip": "10.0.0.6"},
            ],
        }

    def destroy(self, confirm) -> list[tuple[str, str]]:
        self.confirmed.append(confirm("prompt"))
        return [
            ("aws:ec2/instance:Instance", "gpu-001"),
            ("aws:ec2/vpc:Vpc", "dev-vpc"),
            ("aws:s3/bucket:Bucket", "b"),
        ]


class PassThroughTeardown:
    """The data steps are tested in test_aws_teardown.py; here only the destroy goes through."""

    def run(self, spec, outputs, destroy):
        return destroy()


def _provider() -> tuple[AwsStackProvider, Any]:
    spec, _ = load_spec(stack_path("dev"))
    made: list[FakeDriver] = []

    def factory(stack: str) -> FakeDriver:
        made.append(FakeDriver(stack))
        return made[-1]

    provider = AwsStackProvider(spec, driver=factory, teardown=lambda spec: PassThroughTeardown())  # type: ignore[arg-type,return-value]
    provider.resolve_ami = lambda spec: "ami-0123456789abcdef0"
    provider.client = lambda service, region: AllOnline()
    provider.runner = lambda node, timeout_s=0: lambda argv, stdin=None: (0, "", "")
    return provider, (spec, made)


class AllOnline:
    """SSM's DescribeInstanceInformation for a stack whose agents are all online."""

    def describe_instance_information(self, **kwargs: Any) -> dict[str, Any]:
        ids = kwargs["Filters"][0]["Values"]
        return {"InstanceInformationList": [{"InstanceId": i, "PingStatus": "Online"} for i in ids]}


def test_get_provider_picks_the_aws_provider():
    spec, _ = load_spec(stack_path("prod"))
    assert isinstance(get_provider(spec), AwsStackProvider)


def test_plan_create_nodes_and_destroy_through_the_driver():
    provider, (spec, made) = _provider()
    plan = {p.name: p.action for p in provider.plan(spec)}
    assert plan == {"head-001": "keep", "gpu-001": "keep", "gpu-002": "create"}
    assert [n.name for n in provider.create(spec)] == ["gpu-001", "gpu-002"]
    assert [n.provider_id for n in provider.nodes(spec)] == ["i-01", "i-02"]
    summary = provider.destroy(spec)
    assert summary.containers == [] and summary.removed() == {
        "instance": ["gpu-001"],
        "VPC": ["dev-vpc"],
        "bucket": ["b"],
    }
    assert summary.render() == "removed 1 instance, 1 VPC, 1 bucket"
    assert len(made) == 1 and made[0].confirmed == ["dev"]


def test_the_image_is_recorded_before_the_first_up_and_names_reach_the_driver():
    provider, (spec, made) = _provider()
    provider.allow_replace(frozenset({"dev-checkpoints"}))
    provider.create(spec)
    assert made[0].recorded == "ami-0123456789abcdef0"
    assert made[0].allowed == frozenset({"dev-checkpoints"})
