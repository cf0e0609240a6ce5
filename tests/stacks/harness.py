"""Pulumi mocks for the stack tests, set ONCE: ``conftest.py`` imports this module before any
test module, so before any stack component is imported.

Every resource the program registers is recorded as a ``policy.Resource`` so tests and the
policies can look at the whole graph. Mock outputs echo the inputs plus the few computed
attributes the program reads (ids, IPs, DNS names), made deterministic from the names.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

from clusterforge.providers.aws.policy import Graph, PolicyContext, Resource
from clusterforge.providers.aws.stateful import StatefulChange, catalogue, from_steps, predict
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.spec.models import ClusterSpec

REPO = Path(__file__).resolve().parents[2]
STACKS = REPO / "stacks"
if str(STACKS) not in sys.path:
    sys.path.insert(0, str(STACKS))  # `components` is imported as Pulumi imports it from stacks/

MOCK_AMI = "ami-0123456789abcdef0"
# The options of the registration being handled on this thread (see RecordingMonitor).
_OPTIONS = threading.local()


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[Resource] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.ssm_ami = MOCK_AMI  # what the SSM public parameter answers (a new AMI release changes it)

    def reset(self) -> None:
        self.resources = []
        self.calls = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        # Ids unique across types (a subnet and a launch template may share a logical name).
        rid = f"{args.typ.rsplit(':', 1)[-1].lower()}-{args.name}"
        state = dict(args.inputs)
        if args.typ == "aws:ec2/instance:Instance":
            n = sum(1 for r in self.resources if r.type == args.typ)
            state.update(
                privateIp=f"10.0.{n // 250}.{n % 250 + 4}",
                publicIp="198.51.100.10" if "bastion" in args.name else "",
                availabilityZone="mock-az",
            )
            rid = f"i-{n:017x}"
        elif args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            # As AWS does: other template data is another version (a stable number per content).
            digest = hashlib.sha256(json.dumps(args.inputs, sort_keys=True, default=str).encode()).digest()
            state.update(latestVersion=1 + int.from_bytes(digest[:2], "big"))
        elif args.typ == "aws:s3/bucket:Bucket":
            name = args.inputs.get("bucket") or f"{args.inputs.get('bucketPrefix', '')}0001"
            state.update(bucket=name, arn=f"arn:aws:s3:::{name}")
            rid = name
        elif args.typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            state.update(dnsName=f"fs-{args.name}.fsx.mock.amazonaws.com", mountName="abcdefgh")
        elif args.typ == "aws:ec2/vpcEndpoint:VpcEndpoint":
            state.update(prefixListId="pl-63a5400a")
        elif args.typ in ("aws:iam/role:Role", "aws:iam/instanceProfile:InstanceProfile"):
            state.update(name=args.name, arn=f"arn:aws:iam::123456789012:role/{args.name}")
        options = dict(getattr(_OPTIONS, "value", {}))
        self.resources.append(Resource(args.typ, args.name, rid, dict(args.inputs), options))
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:ssm/getParameter:getParameter":
            return {
                "name": args.args["name"],
                "value": self.ssm_ami,
                "type": "String",
                "id": args.args["name"],
            }, []
        return {}, []


class RecordingMonitor(MockMonitor):
    """Pulumi's mock monitor, keeping the resource options the mocks never see (the policies and
    the replacement simulation need dependencies, ignoreChanges and deleteBeforeReplace)."""

    def RegisterResource(self, request: Any) -> Any:  # the gRPC method's name
        _OPTIONS.value = {
            "urn": self.make_urn(request.parent, request.type, request.name),
            "dependencies": list(request.dependencies),
            "ignoreChanges": list(request.ignoreChanges),
            "deleteBeforeReplace": bool(request.deleteBeforeReplace),
            "retainOnDelete": bool(request.retainOnDelete),
            "protect": bool(request.protect),
        }
        try:
            return super().RegisterResource(request)
        finally:
            _OPTIONS.value = {}


MOCKS = RecordingMocks()
pulumi.runtime.set_mocks(
    MOCKS, project="clusterforge", stack="test", preview=False, monitor=RecordingMonitor(MOCKS)
)


def descendants(roots: list[pulumi.Resource]) -> list[pulumi.Resource]:
    """Every resource under ``roots`` (Pulumi keeps each parent's children in ``_childResources``)."""
    out: list[pulumi.Resource] = []
    todo = list(roots)
    while todo:
        res = todo.pop()
        out.append(res)
        todo.extend(getattr(res, "_childResources", ()))
    return out


async def settle(roots: list[pulumi.Resource]) -> list[Resource]:
    """Wait until every resource under ``roots`` is registered (its URN resolved), so the mocks
    have seen the whole program; then the recorded graph."""
    known = -1
    while known != len(MOCKS.resources):  # resources made inside apply() come later: repeat
        known = len(MOCKS.resources)
        await pulumi.Output.all(*[r.urn for r in descendants(roots)]).future()
        for _ in range(3):
            await asyncio.sleep(0)
    return list(MOCKS.resources)


def load_example(stack: str, **changes: Any) -> ClusterSpec:
    """An example spec from stacks/, optionally with top-level fields replaced."""
    spec, _ = load_spec(stack_path(stack))
    return spec.model_copy(update=changes) if changes else spec


def aws_examples() -> list[str]:
    """Every example stack whose provider is AWS (the policy tests run over all of them)."""
    out = []
    for path in sorted(STACKS.glob("*.yaml")):
        if path.stem.startswith("Pulumi"):
            continue
        spec, _ = load_spec(path)
        if spec.provider.kind == "aws":
            out.append(path.stem)
    return out


_GRAPHS: dict[str, list[Resource]] = {}


async def program(
    spec: ClusterSpec,
    ssm_ami: str = MOCK_AMI,
    recorded_ami: str | None = None,
    allow_replace: frozenset[str] = frozenset(),
    pool_images: dict[str, str] | None = None,
) -> Graph:
    """Run the whole program for ``spec`` under the mocks; the recorded resource graph.

    ``ssm_ami`` is what the SSM public parameter answers on this run; ``recorded_ami`` what the
    stack config recorded on an earlier one. The program is deterministic, so each distinct
    input runs once per session and later tests get the same recorded graph."""
    from components.cluster import build_cluster

    key = json.dumps([spec.model_dump_json(), ssm_ami, recorded_ami, sorted(allow_replace), pool_images])
    if key not in _GRAPHS:
        MOCKS.reset()
        MOCKS.ssm_ami = ssm_ami
        try:
            cluster = build_cluster(
                spec, recorded_ami=recorded_ami, allow_replace=allow_replace, pool_images=pool_images
            )
            _GRAPHS[key] = await settle(
                [cluster.network, cluster.storage, cluster.iam, cluster.head, *cluster.pools]
            )
        finally:
            MOCKS.ssm_ami = MOCK_AMI
    return Graph(list(_GRAPHS[key]))


def policy_context(spec: ClusterSpec) -> PolicyContext:
    return PolicyContext(
        admin_cidrs=tuple(str(c) for c in spec.provider.admin_cidrs), vpc_cidr=str(spec.network.vpc_cidr)
    )


def _without(inputs: dict[str, Any], path: str) -> None:
    """Drop one ignoreChanges path (``a.b`` or ``tags["k"]``) from ``inputs``, in place."""
    parts = path.replace('["', ".").replace('"]', "").split(".")
    node: Any = inputs
    for part in parts[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return
    if isinstance(node, dict):
        node.pop(parts[-1], None)


def changed_instances(before: Graph, after: Graph) -> list[str]:
    """Instances a second ``pulumi up`` would touch, as the engine decides it: their inputs
    differ once the ``ignoreChanges`` paths are taken out (any other instance input change
    replaces an EC2 instance: launch template version, AMI, subnet, placement)."""
    old = {r.name: r for r in before.of("aws:ec2/instance:Instance")}
    out = []
    for new in after.of("aws:ec2/instance:Instance"):
        prev = old.get(new.name)
        if prev is None:
            continue
        a, b = json.loads(json.dumps(prev.inputs)), json.loads(json.dumps(new.inputs))
        for path in new.options.get("ignoreChanges", []):
            _without(a, path)
            _without(b, path)
        if a != b:
            out.append(new.name)
    return sorted(out)


def stateful_changes(before: Graph, after: Graph) -> list[StatefulChange]:
    """What a second ``pulumi up`` would do to the resources that hold data, as the AWS provider
    decides it (clusterforge/data/aws_stateful.yaml: its replace-on-change arguments): replaces
    (with the keys that force them) and deletes. Stands in for the engine's preview here."""
    cat = catalogue()
    old = {(r.type, r.name): r for r in before.resources if cat.holds_data(r.type, r.name)}
    new = {(r.type, r.name): r for r in after.resources if cat.holds_data(r.type, r.name)}
    steps: list[tuple[str, str, str, tuple[str, ...]]] = []
    for key, res in old.items():
        if key not in new:
            steps.append(("delete", res.type, res.name, ()))
            continue
        a, b = json.loads(json.dumps(res.inputs)), json.loads(json.dumps(new[key].inputs))
        op, keys = predict(res.type, a, b)
        if op == "replace":
            steps.append((op, res.type, res.name, keys))
    return from_steps(steps)
