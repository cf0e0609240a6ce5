"""The AWS provider behind ``clusterforge.providers.base.Provider``: preflight with boto3,
provisioning with the Pulumi program through the Automation API, nodes from the stack outputs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from clusterforge.providers.aws.automation import INSTANCE_TYPE, DataAtRisk, PreviewSummary, StackDriver
from clusterforge.providers.aws.images import current_ami
from clusterforge.providers.aws.inventory import nodes_from_outputs
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
                action = "create" if changing.get(name) in ("create", "replace") else "keep"
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
        return nodes_from_outputs(spec, outputs)

    def nodes(self, spec: ClusterSpec) -> list[Node]:
        self._outputs[spec.stack] = dict(self._driver(spec).outputs())
        return nodes_from_outputs(spec, self._outputs[spec.stack])

    def stack_outputs(self, spec: ClusterSpec) -> dict[str, Any]:
        """The stack outputs (FSx names, bucket, ...) the inventory renders beside the node list."""
        if spec.stack not in self._outputs:
            self._outputs[spec.stack] = dict(self._driver(spec).outputs())
        return self._outputs[spec.stack]

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
