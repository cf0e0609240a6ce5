"""An AWS node's life after `up`, at the botocore seam (Stubber checks every request against the EC2
model): `invoke replace` terminates the instance and waits until its capacity reservation counts the
slot free before the next `up` launches the new one; the certification verdict lands in the
clusterforge:certification tag; `down` says what keeps billing."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from clusterforge.providers.aws.provider import CERTIFICATION_TAG, AwsStackProvider
from clusterforge.providers.base import Node, ProviderError
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.tasks import cluster as cluster_tasks

GPU_003 = "i-0aaaaaaaaaaaaaa03"
CR = "cr-0a1b2c3d4e5f60718"


@pytest.fixture(autouse=True)
def _creds(monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_EC2_METADATA_DISABLED", "true")):  # fmt: skip
        monkeypatch.setenv(var, value)


class Driver:
    def __init__(self, stack: str) -> None:
        self.stack = stack

    def outputs(self) -> dict[str, Any]:
        node = {"pool": "gpu", "role": "gpu", "instance_type": "p5.48xlarge", "private_ip": "10.0.0.13"}
        return {"transfer_bucket": "t", "nodes": [{**node, "name": "gpu-003", "instance_id": GPU_003}]}


def _provider(ec2: Any) -> AwsStackProvider:
    spec, _ = load_spec(stack_path("prod"))
    provider = AwsStackProvider(spec, driver=Driver)  # type: ignore[arg-type]
    provider.client = lambda service, region: ec2
    provider.sleep = lambda s: None
    return provider


def _reservation(free: int) -> dict[str, Any]:
    return {
        "CapacityReservations": [
            {"CapacityReservationId": CR, "AvailableInstanceCount": free, "TotalInstanceCount": 16}
        ]
    }


def _terminated() -> dict[str, Any]:
    return {
        "Reservations": [
            {"Instances": [{"InstanceId": GPU_003, "State": {"Code": 48, "Name": "terminated"}}]}
        ]
    }


def test_replace_terminates_then_waits_for_the_reservation_slot() -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    spec, _ = load_spec(stack_path("prod"))
    progress: list[str] = []
    with Stubber(ec2) as stub:
        stub.add_response("terminate_instances", {"TerminatingInstances": []}, {"InstanceIds": [GPU_003]})
        stub.add_response("describe_instances", _terminated(), {"InstanceIds": [GPU_003]})
        want = {"CapacityReservationIds": [CR]}
        stub.add_response("describe_capacity_reservations", _reservation(0), want)  # not counted free yet
        stub.add_response("describe_capacity_reservations", _reservation(1), want)
        _provider(ec2).replace_node(spec, "gpu-003", lambda node, line: progress.append(line))
        stub.assert_no_pending_responses()
    assert progress == [f"terminating {GPU_003}", f"waiting for {CR} to count the slot free"]


def test_a_slot_that_never_frees_stops_with_the_figures() -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    spec, _ = load_spec(stack_path("prod"))
    with Stubber(ec2) as stub:
        stub.add_response("terminate_instances", {"TerminatingInstances": []})
        stub.add_response("describe_instances", _terminated())
        for _ in range(61):
            stub.add_response("describe_capacity_reservations", _reservation(0))
        with pytest.raises(
            ProviderError,
            match=rf"{CR} still has no free instance 900 s after the termination \(0 of 16 free\)",
        ):
            _provider(ec2).replace_node(spec, "gpu-003")


def test_the_verdicts_are_written_as_instance_tags() -> None:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    spec, _ = load_spec(stack_path("prod"))
    nodes = [
        Node(f"gpu-00{i}", "10.0.0.1", "gpu", "gpu", "p5.48xlarge", {}, f"i-0aaaaaaaaaaaaaa0{i}")
        for i in (1, 2, 3)
    ]
    with Stubber(ec2) as stub:
        tag = lambda value: [{"Key": CERTIFICATION_TAG, "Value": value}]  # noqa: E731
        stub.add_response(
            "create_tags",
            {},
            {"Resources": ["i-0aaaaaaaaaaaaaa01", "i-0aaaaaaaaaaaaaa03"], "Tags": tag("certified")},
        )
        stub.add_response("create_tags", {}, {"Resources": ["i-0aaaaaaaaaaaaaa02"], "Tags": tag("failed")})
        _provider(ec2).record_certification(spec, {"gpu-001": True, "gpu-002": False, "gpu-003": True}, nodes)
        stub.assert_no_pending_responses()


def test_down_says_the_reservation_keeps_billing(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path))
    spec, _ = load_spec(stack_path("prod"))
    provider = _provider(None)
    (line,) = provider.keeps_billing(spec)
    assert line.startswith(f"capacity reservation {CR} (pool gpu, p5.48xlarge) is not part of the stack")
    assert f"aws ec2 cancel-capacity-reservation --region us-east-1 --capacity-reservation-id {CR}" in line

    class Gone:
        def nodes(self, spec):
            return []

        def data_at_risk(self, spec):
            return []

        keeps_billing = provider.keeps_billing

        def destroy(self, spec):
            from clusterforge.providers.base import DestroySummary

            return DestroySummary(other={"instance": ["gpu-001"]})

    monkeypatch.setattr("clusterforge.providers.get_provider", lambda spec: Gone())
    out = io.StringIO()
    with redirect_stdout(out):
        cluster_tasks._down(spec, yes=True)
    assert f"still billing: capacity reservation {CR}" in out.getvalue()
