"""Pulumi mocks for the stack tests, set ONCE: ``conftest.py`` imports this module before any
test module, so before any stack component is imported.

Every resource the program registers is recorded as a ``policy.Resource`` so tests and the
policies can look at the whole graph. Mock outputs echo the inputs plus the few computed
attributes the program reads (ids, IPs, DNS names), made deterministic from the names.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pulumi

from clusterforge.providers.aws.policy import Graph, PolicyContext, Resource
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.spec.models import ClusterSpec

REPO = Path(__file__).resolve().parents[2]
STACKS = REPO / "stacks"
if str(STACKS) not in sys.path:
    sys.path.insert(0, str(STACKS))  # `components` is imported as Pulumi imports it from stacks/

MOCK_AMI = "ami-0123456789abcdef0"


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[Resource] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []

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
            state.update(latestVersion=1)
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
        self.resources.append(Resource(args.typ, args.name, rid, dict(args.inputs)))
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        self.calls.append((args.token, dict(args.args)))
        if args.token == "aws:ssm/getParameter:getParameter":
            return {
                "name": args.args["name"],
                "value": MOCK_AMI,
                "type": "String",
                "id": args.args["name"],
            }, []
        return {}, []


MOCKS = RecordingMocks()
pulumi.runtime.set_mocks(MOCKS, project="clusterforge", stack="test", preview=False)


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


async def program(spec: ClusterSpec) -> Graph:
    """Run the whole program for ``spec`` under the mocks; the recorded resource graph.

    The program is deterministic, so each distinct spec runs once per session and later tests
    get the same recorded graph (keeps the suite near one program run per spec)."""
    from components.cluster import build_cluster

    key = spec.model_dump_json()
    if key not in _GRAPHS:
        MOCKS.reset()
        cluster = build_cluster(spec)
        _GRAPHS[key] = await settle(
            [cluster.network, cluster.storage, cluster.iam, cluster.head, *cluster.pools]
        )
    return Graph(list(_GRAPHS[key]))


def policy_context(spec: ClusterSpec) -> PolicyContext:
    return PolicyContext(
        admin_cidrs=tuple(str(c) for c in spec.provider.admin_cidrs), vpc_cidr=str(spec.network.vpc_cidr)
    )
