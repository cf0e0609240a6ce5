"""EC2 nodes ready before the first converge, and reboots the pipeline owns on SSM stacks, at the
botocore seam (Stubber: every request checked against the SSM and EC2 API models) with the node
side answered by a fake runner."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from clusterforge.providers.aws import readiness
from clusterforge.providers.base import Node

SSM_CONN = {"ansible_connection": "amazon.aws.aws_ssm", "ansible_aws_ssm_region": "us-east-1"}


def node(i: int) -> Node:
    iid = f"i-0{i:016x}"
    return Node(
        f"gpu-{i:03d}", f"10.0.0.{i}", "gpu", "gpu", "p5.48xlarge", {**SSM_CONN, "ansible_host": iid}, iid
    )


@pytest.fixture(autouse=True)
def _creds(monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_EC2_METADATA_DISABLED", "true")):  # fmt: skip
        monkeypatch.setenv(var, value)


def info(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"InstanceInformationList": [{"InstanceId": i, "PingStatus": s} for i, s in pairs]}


class Nodes:
    """The node side: answers per node name and command."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
        self.calls: list[tuple[str, list[str]]] = []

    def runner(self, n: Node, timeout_s: float = 0):
        def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
            self.calls.append((n.name, argv))
            key = (n.name, argv[0] if argv[0] != "sh" else "ready")
            queue = self.answers.get(key) or [(0, "", "")]
            return queue.pop(0) if len(queue) > 1 else queue[0]

        return run


def test_nodes_wait_for_the_agent_then_cloud_init_and_the_dpkg_lock() -> None:
    ssm = boto3.client("ssm", region_name="us-east-1")
    nodes = [node(1), node(2)]
    ids = [n.provider_id for n in nodes]
    with Stubber(ssm) as stub:
        want = {"Filters": [{"Key": "InstanceIds", "Values": ids}], "MaxResults": 50}
        stub.add_response("describe_instance_information", info((ids[0], "Online")), want)
        want2 = {"Filters": [{"Key": "InstanceIds", "Values": [ids[1]]}], "MaxResults": 50}
        stub.add_response("describe_instance_information", info((ids[1], "Online")), want2)
        side = Nodes()
        side.answers[("gpu-002", "ready")] = [(3, "cloud-init status --wait exited 1", "")]
        problems = readiness.wait_ready(ssm, nodes, side.runner, sleep=lambda s: None)
    assert problems == {"gpu-002": "not ready: cloud-init status --wait exited 1"}
    # the script on each node: cloud-init (0 or 2 is done) then the dpkg front-end lock
    scripts = [argv for _, argv in side.calls]
    assert all(
        a[:2] == ["sh", "-c"] and "cloud-init status --wait" in a[2] and "lock-frontend" in a[2]
        for a in scripts
    )


def test_an_agent_that_never_registers_is_named_at_the_deadline() -> None:
    ssm = boto3.client("ssm", region_name="us-east-1")
    ticks = iter([0.0, 100.0, 2000.0])
    with Stubber(ssm) as stub:
        stub.add_response("describe_instance_information", info())
        stub.add_response("describe_instance_information", info())
        problems = readiness.wait_online(
            ssm, [node(3)], timeout_s=1800, sleep=lambda s: None, clock=lambda: next(ticks)
        )
    assert problems == {"gpu-003": "SSM agent not online after 1800 s (instance i-00000000000000003)"}


def test_the_pipeline_reboots_marked_nodes_through_ec2_and_waits_for_a_new_boot() -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    ssm = boto3.client("ssm", region_name="us-east-1")
    nodes = [node(1), node(2)]
    side = Nodes()
    side.answers[("gpu-001", "test")] = [(0, "", "")]  # the driver role left a reboot here
    side.answers[("gpu-002", "test")] = [(1, "", "")]
    pending = readiness.reboot_pending(nodes, side.runner)
    assert [n.name for n in pending] == ["gpu-001"]
    # boot id before, still the old one while SSM reports online (it lags), then a new one
    side.answers[("gpu-001", "cat")] = [(0, "aaaa\n", ""), (0, "aaaa\n", ""), (0, "bbbb\n", "")]
    iid = nodes[0].provider_id
    with Stubber(ec2) as e, Stubber(ssm) as s:
        e.add_response("reboot_instances", {}, {"InstanceIds": [iid]})
        s.add_response("describe_instance_information", info((iid, "Online")))
        s.add_response("describe_instance_information", info((iid, "Online")))
        problems = readiness.reboot(ec2, ssm, pending, side.runner, sleep=lambda t: None)
    assert problems == {}
    assert [argv for name, argv in side.calls if name == "gpu-001"][-1] == ["cat", readiness.BOOT_ID]
