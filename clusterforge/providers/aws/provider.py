"""The AWS provider behind ``clusterforge.providers.base.Provider``: preflight with boto3,
provisioning with the Pulumi program through the Automation API, nodes from the stack outputs."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from clusterforge.node.remote import node_runner
from clusterforge.providers.aws import readiness
from clusterforge.providers.aws.automation import INSTANCE_TYPE, DataAtRisk, PreviewSummary, StackDriver
from clusterforge.providers.aws.images import current_ami
from clusterforge.providers.aws.inventory import nodes_from_outputs
from clusterforge.providers.aws.readiness import wait_ready
from clusterforge.providers.aws.teardown import Teardown, data_at_risk, make_teardown_clients
from clusterforge.providers.base import (
    DestroySummary,
    Node,
    PlannedNode,
    Problem,
    Progress,
    ProviderError,
    no_progress,
)
from clusterforge.spec.models import AwsProvider, ClusterSpec

# What `invoke down` names, by Pulumi type; every other resource counts as a "resource".
KINDS = {
    INSTANCE_TYPE: "instance",
    "aws:ec2/vpc:Vpc": "VPC",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/securityGroup:SecurityGroup": "security group",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "file system",
    "aws:s3/bucket:Bucket": "bucket",
    "aws:s3/bucketV2:BucketV2": "bucket",
}


def _boto3_client(service: str, region: str) -> Any:
    import boto3

    return boto3.client(service, region_name=region)


def _over_ssm(spec: ClusterSpec) -> bool:
    return isinstance(spec.provider, AwsProvider) and spec.provider.connection == "ssm"


CAPACITY_WAIT_S = 900.0
# stacks/components/tags.py CERTIFICATION (the program imports nothing from here).
CERTIFICATION_TAG = "clusterforge:certification"


def wait_for_capacity(
    ec2: Any,
    reservation: str,
    sleep: Callable[[float], None],
    timeout_s: float = CAPACITY_WAIT_S,
    poll_s: float = 15.0,
) -> None:
    """Until the reservation has a free instance again (``AvailableInstanceCount`` >= 1)."""
    waited = 0.0
    while True:
        (res,) = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation])[
            "CapacityReservations"
        ]
        if int(res.get("AvailableInstanceCount", 0)) >= 1:
            return
        if waited >= timeout_s:
            raise ProviderError(
                f"{reservation} still has no free instance {timeout_s:g} s after the termination "
                f"({res.get('AvailableInstanceCount')} of {res.get('TotalInstanceCount')} free): run "
                "`invoke up` later, when the reservation shows one free"
            )
        sleep(poll_s)
        waited += poll_s


def _typed_answer(prompt: str) -> str:
    """What a person types; "" where nobody can (no terminal): the safe answer keeps the data."""
    return input(prompt) if sys.stdin.isatty() else ""


def _teardown(spec: ClusterSpec) -> Teardown:
    region = spec.provider.region if isinstance(spec.provider, AwsProvider) else ""
    return Teardown(make_teardown_clients(region), ask=_typed_answer, say=print)


class AwsStackProvider:
    def __init__(
        self,
        spec: ClusterSpec,
        driver: Callable[[str], StackDriver] = StackDriver,
        teardown: Callable[[ClusterSpec], Teardown] = _teardown,
    ) -> None:
        if not isinstance(spec.provider, AwsProvider):
            raise ValueError(f"stack {spec.stack!r}: provider.kind is {spec.provider.kind!r}, not 'aws'")
        self._driver_factory = driver
        self._teardown = teardown
        self._drivers: dict[str, StackDriver] = {}
        self._outputs: dict[str, dict[str, Any]] = {}
        self._previews: dict[str, PreviewSummary] = {}
        self._allowed: frozenset[str] = frozenset()
        # The image a first run boots, recorded before it starts (tests pass a fake).
        self.resolve_ami: Callable[[ClusterSpec], str] = lambda s: current_ami(
            s.software.os_image, s.provider.region if isinstance(s.provider, AwsProvider) else ""
        )
        # boto3 clients by (service, region); tests pass stubbed ones.
        self.client: Callable[[str, str], Any] = _boto3_client
        # How commands reach a node (SSM Run Command on ssm stacks); tests pass a fake.
        self.runner: Callable[..., Any] = node_runner
        self.sleep: Callable[[float], None] = time.sleep

    def allow_replace(self, names: frozenset[str]) -> None:
        """Data-holding resources (`invoke up --allow-replace NAME`) the next create may replace."""
        self._allowed = frozenset(names)

    def _driver(self, spec: ClusterSpec) -> StackDriver:
        if spec.stack not in self._drivers:
            self._drivers[spec.stack] = self._driver_factory(spec.stack)
        return self._drivers[spec.stack]

    def preflight(self, spec: ClusterSpec) -> list[Problem]:
        from clusterforge.providers.aws.preflight import CredentialsError, make_clients, run_preflight

        region = spec.provider.region if isinstance(spec.provider, AwsProvider) else ""
        try:
            findings = run_preflight(spec, make_clients(region))
        except CredentialsError as exc:
            return [Problem("error", "aws-credentials", str(exc))]
        return [f.to_problem() for f in findings if f.level != "info"]

    def preview(self, spec: ClusterSpec) -> PreviewSummary:
        """The refreshed Pulumi preview, once per stack and process (plan asks it twice)."""
        if spec.stack not in self._previews:
            self._previews[spec.stack] = self._driver(spec).preview()
        return self._previews[spec.stack]

    def data_changes(self, spec: ClusterSpec) -> list[str]:
        """Replaces and deletes of resources that hold data, one line each (for `invoke plan`)."""
        return [c.render() for c in self.preview(spec).stateful]

    def plan(self, spec: ClusterSpec) -> list[PlannedNode]:
        """From the Pulumi preview: nodes it would create or replace, and those it keeps."""
        summary = self.preview(spec)
        changing = summary.nodes
        planned = []
        for pool in spec.node_pools:
            for name in spec.node_names(pool):
                action: Literal["create", "keep"] = (
                    "create" if changing.get(name) in ("create", "replace") else "keep"
                )
                planned.append(PlannedNode(name, pool.name, pool.role, pool.instance_type, action))
        return planned

    def create(self, spec: ClusterSpec, progress: Progress = no_progress) -> list[Node]:
        driver = self._driver(spec)
        driver.on_output = lambda line: progress(spec.stack, line.rstrip())
        if isinstance(spec.provider, AwsProvider) and not spec.provider.ami:
            driver.ensure_ami(lambda: self.resolve_ami(spec))
        self._previews.pop(spec.stack, None)
        try:
            outputs = driver.up(allow_replace=self._allowed)
        except DataAtRisk as exc:
            raise ProviderError(str(exc)) from None
        self._outputs[spec.stack] = dict(outputs)
        nodes = nodes_from_outputs(spec, outputs)
        if _over_ssm(spec):
            # Before the first converge: agent online, cloud-init done, dpkg lock free.
            ready = wait_ready(
                self._client(spec, "ssm"), [n for n in nodes if n.state == "running"], self.runner
            )
            nodes = [replace(n, state=f"not ready: {ready[n.name]}") if n.name in ready else n for n in nodes]
        return nodes

    def reboot_pending(
        self, spec: ClusterSpec, nodes: list[Node], runner: Callable[..., Any]
    ) -> tuple[list[str], dict[str, str]]:
        """SSM stacks: reboot the nodes whose driver role left a reboot (aws_ssm cannot reconnect
        across one, amazon.aws issue 3044); (rebooted, {node: why not back})."""
        if not _over_ssm(spec):
            return [], {}
        pending = readiness.reboot_pending(nodes, runner)
        problems = readiness.reboot(self._client(spec, "ec2"), self._client(spec, "ssm"), pending, runner)
        return [n.name for n in pending if n.name not in problems], problems

    def replace_node(self, spec: ClusterSpec, node: str, progress: Progress = no_progress) -> None:
        """Put one node on a new machine (`invoke replace`): terminate its instance, wait until the
        pool's capacity reservation has that slot free again, and let the next `up` (with refresh,
        which drops the terminated instance from the state) launch the replacement. In a full
        reservation a launch right after a termination fails with InsufficientInstanceCapacity:
        the slot is released only once the instance is terminated and the reservation counted it."""
        outputs = self.stack_outputs(spec)
        entry = next((e for e in outputs.get("nodes") or [] if e.get("name") == node), None)
        if entry is None:
            raise ProviderError(
                f"stack {spec.stack!r} has no instance for {node!r}; run `invoke up` to create it"
            )
        ec2 = self._client(spec, "ec2")
        iid = str(entry["instance_id"])
        progress(node, f"terminating {iid}")
        ec2.terminate_instances(InstanceIds=[iid])
        ec2.get_waiter("instance_terminated").wait(
            InstanceIds=[iid], WaiterConfig={"Delay": 15, "MaxAttempts": 80}
        )
        pool = spec.pool(entry["pool"])
        target = pool.capacity_block_id or pool.capacity_reservation_id
        if target:
            progress(node, f"waiting for {target} to count the slot free")
            wait_for_capacity(ec2, target, self.sleep)
        self._outputs.pop(spec.stack, None)
        self._previews.pop(spec.stack, None)

    def record_certification(self, spec: ClusterSpec, passed: dict[str, bool], nodes: list[Node]) -> None:
        """The verdict on each instance, as tag clusterforge:certification = certified | failed (the
        program creates it "pending" and never writes it again: node_pool ignores changes to it).
        One CreateTags call per verdict and 1,000 instances."""
        ec2 = self._client(spec, "ec2")
        ids = {n.name: n.provider_id for n in nodes if n.provider_id.startswith("i-")}
        for verdict, ok in (("certified", True), ("failed", False)):
            chosen = sorted(ids[name] for name, good in passed.items() if good is ok and name in ids)
            for start in range(0, len(chosen), 1000):
                ec2.create_tags(
                    Resources=chosen[start : start + 1000],
                    Tags=[{"Key": CERTIFICATION_TAG, "Value": verdict}],
                )

    def _client(self, spec: ClusterSpec, service: str) -> Any:
        region = spec.provider.region if isinstance(spec.provider, AwsProvider) else ""
        return self.client(service, region)

    def nodes(self, spec: ClusterSpec) -> list[Node]:
        self._outputs[spec.stack] = dict(self._driver(spec).outputs())
        return nodes_from_outputs(spec, self._outputs[spec.stack])

    def stack_outputs(self, spec: ClusterSpec) -> dict[str, Any]:
        """The stack outputs (FSx names, bucket, ...) the inventory renders beside the node list."""
        if spec.stack not in self._outputs:
            self._outputs[spec.stack] = dict(self._driver(spec).outputs())
        return self._outputs[spec.stack]

    def keeps_billing(self, spec: ClusterSpec) -> list[str]:
        """What `down` leaves behind that AWS keeps charging for: the capacity reservations the pools
        launched into are the account's, not the stack's ("You are charged for the reserved capacity
        whether or not you run instances in it", EC2 user guide, Capacity Reservation pricing)."""
        region = spec.provider.region if isinstance(spec.provider, AwsProvider) else ""
        lines = []
        for pool in spec.node_pools:
            if pool.capacity_reservation_id:
                rid = pool.capacity_reservation_id
                lines.append(
                    f"capacity reservation {rid} (pool {pool.name}, {pool.instance_type}) is not part of the stack and "
                    f"keeps billing until it is cancelled: aws ec2 cancel-capacity-reservation --region {region} "
                    f"--capacity-reservation-id {rid}"
                )
            if pool.capacity_block_id:
                lines.append(
                    f"Capacity Block {pool.capacity_block_id} (pool {pool.name}) was paid for in advance and runs to its "
                    "end date whether or not instances use it"
                )
        return lines

    def data_at_risk(self, spec: ClusterSpec) -> list[str]:
        """The data a destroy would lose (file system, bucket contents), one line each."""
        teardown = self._teardown(spec)
        return [r.render() for r in data_at_risk(self._driver(spec).outputs(), teardown.clients)]

    def destroy(self, spec: ClusterSpec) -> DestroySummary:
        """Destroy the stack. The caller (``invoke down``) has already had the stack name typed;
        the data goes through ``teardown``: a final FSx backup first, the bucket only on a typed
        answer (see ``clusterforge.providers.aws.teardown``)."""
        driver = self._driver(spec)
        outputs = driver.outputs()
        gone = self._teardown(spec).run(
            spec, outputs, lambda: driver.destroy(confirm=lambda prompt: spec.stack)
        )
        self._outputs.pop(spec.stack, None)
        other: dict[str, list[str]] = {}
        for type_, name in gone:
            other.setdefault(KINDS.get(type_, "other resource"), []).append(name)
        return DestroySummary(other={kind: sorted(names) for kind, names in other.items()})
