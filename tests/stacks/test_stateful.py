"""The resources that hold data (the FSx file system, the checkpoint bucket) are never replaced or
deleted behind anyone's back: the program protects them and backs the file system up, `invoke plan`
shows a change that would replace one, and `invoke up` refuses it unless told by name.

The engine's decision is stood in for by the provider's own replace-on-change arguments
(clusterforge/data/aws_stateful.yaml, from terraform-provider-aws): the program runs under Pulumi's
mocks for the old and the new spec, the catalogue says what the preview would do, and that preview
goes through the real Automation-API code (a fake Stack at its seam) into the plan and `up`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi import automation as auto

from clusterforge.plan.impact import plan_impacts
from clusterforge.plan.inputs import stack_inputs
from clusterforge.plan.live import live_state
from clusterforge.plan.render import Plan, markdown
from clusterforge.providers.aws.automation import StackDriver
from clusterforge.providers.aws.provider import AwsStackProvider
from clusterforge.providers.aws.stateful import StatefulChange
from clusterforge.providers.base import ProviderError
from clusterforge.spec.models import ClusterSpec
from tests.providers.test_aws_automation import PREFIX, RecordingStack
from tests.stacks.harness import load_example, program, stateful_changes

pytestmark = pytest.mark.slow  # the whole Pulumi program, several specs, under the mocks

FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
ROOT = Path(__file__).resolve().parents[2]


def with_fsx(spec: ClusterSpec, **changes: Any) -> ClusterSpec:
    fsx = spec.storage.fsx_lustre
    assert fsx is not None
    storage = spec.storage.model_copy(update={"fsx_lustre": fsx.model_copy(update=changes)})
    return spec.model_copy(update={"storage": storage})


@pulumi.runtime.test
def test_the_file_system_and_the_checkpoints_are_protected_and_backed_up():
    async def check():
        graph = await program(load_example("prod"))
        (fs,) = graph.of(FSX)
        assert fs.options["protect"] is True
        assert fs.inputs["automaticBackupRetentionDays"] == 7
        assert fs.inputs["dailyAutomaticBackupStartTime"] == "03:00"
        assert fs.inputs["skipFinalBackup"] is False  # pulumi-aws 7.51.1 defaults it to true
        buckets = {b.name: b for b in graph.of("aws:s3/bucket:Bucket")}
        assert buckets["prod-checkpoints"].options["protect"] is True
        assert buckets["prod-ssm-transfer"].options["protect"] is False  # transient copies only
        # Told by name (`invoke up --allow-replace prod-fsx`), that run lifts protect on it alone.
        allowed = await program(load_example("prod"), allow_replace=frozenset({"prod-fsx"}))
        assert allowed.of(FSX)[0].options["protect"] is False
        assert {b.name: b.options["protect"] for b in allowed.of("aws:s3/bucket:Bucket")}["prod-checkpoints"]

    return check()


@pulumi.runtime.test
def test_the_providers_rules_decide_which_edits_replace_the_file_system():
    async def check():
        prod = load_example("prod")
        before = await program(prod)
        moved = await program(with_fsx(prod, deployment_type="PERSISTENT_1", per_unit_storage_throughput=200))
        assert stateful_changes(before, moved) == [
            StatefulChange(FSX, "prod-fsx", "replace", ("deploymentType",))
        ]
        # Updated in place (terraform-provider-aws Update paths): more capacity, other throughput.
        grown = await program(with_fsx(prod, storage_capacity_gib=50400, per_unit_storage_throughput=500))
        assert stateful_changes(before, grown) == []
        shrunk = await program(with_fsx(prod, storage_capacity_gib=24000))
        assert stateful_changes(before, shrunk) == [
            StatefulChange(FSX, "prod-fsx", "replace", ("storageCapacity",))
        ]
        gone = await program(
            prod.model_copy(update={"storage": prod.storage.model_copy(update={"fsx_lustre": None})})
        )
        assert [(c.name, c.op) for c in stateful_changes(before, gone)] == [("prod-fsx", "delete")]

    return check()


def _preview_of(changes: list[StatefulChange]) -> list[auto.EngineEvent]:
    """The engine events a Pulumi preview streams for these steps (what the CLI sends)."""
    events = []
    for seq, c in enumerate(changes):
        urn = f"{PREFIX}clusterforge:storage:Storage${c.type}::{c.name}"
        op = auto.OpType.REPLACE if c.op == "replace" else auto.OpType.DELETE
        meta = auto.StepEventMetadata(op=op, urn=urn, type=c.type, provider="", keys=list(c.keys))
        events.append(
            auto.EngineEvent(
                sequence=seq, timestamp=0, resource_pre_event=auto.ResourcePreEvent(metadata=meta)
            )
        )
    return events


def _aws_provider(spec: ClusterSpec, stack: RecordingStack) -> AwsStackProvider:
    provider = AwsStackProvider(spec, driver=lambda name: StackDriver(name, factory=lambda n, d: stack))
    provider.resolve_ami = lambda spec: "ami-0123456789abcdef0"
    return provider


@pulumi.runtime.test
def test_plan_shows_the_file_system_replaced_and_up_refuses_it_unless_named(monkeypatch: pytest.MonkeyPatch):
    async def check():
        prod = load_example("prod")
        changed = with_fsx(prod, deployment_type="PERSISTENT_1", per_unit_storage_throughput=200)
        predicted = stateful_changes(await program(prod), await program(changed))
        stack = RecordingStack("ami-0123456789abcdef0")
        stack.events = _preview_of(predicted)
        provider = _aws_provider(changed, stack)
        monkeypatch.setattr(provider, "nodes", lambda spec: [])  # no instances asked: data only

        # invoke plan --stack prod: the live view carries the data line; the plan is pending
        state = live_state(changed, provider, previewer=lambda stack_name: {})
        (line,) = state.data
        assert line.startswith("file system prod-fsx (the cluster's shared files")
        assert "would be replaced: a new one is created and the old one, with its data, deleted" in line
        assert "because deploymentType changed" in line and "--allow-replace prod-fsx" in line
        base, new = stack_inputs(prod, ROOT, "main"), stack_inputs(changed, ROOT, "working tree")
        plan = Plan("prod", "main", "working tree", plan_impacts(base, new, state), data=state.data)
        assert plan.pending
        assert "DATA AT RISK: 1 resource(s) replaced or deleted" in plan.headline()
        assert "> **DATA**: file system prod-fsx" in markdown(plan)

        # invoke up --stack prod: refused, nothing run, until told by name
        with pytest.raises(ProviderError, match="--allow-replace prod-fsx"):
            provider.create(changed)
        assert "up" not in stack.calls
        provider.allow_replace(frozenset({"prod-fsx"}))
        provider.create(changed)
        assert 'set_config clusterforge:allow-replace=["prod-fsx"]' in stack.calls and "up" in stack.calls

    return check()
