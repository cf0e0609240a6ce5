"""Policies over the whole mocked resource graph of every example AWS stack, and proof that each
policy fails when a spec or the program's output is changed to break it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace

import pulumi
import pytest

from clusterforge.providers.aws import policy as p
from clusterforge.spec.models import ClusterSpec, PlacementGroup
from tests.stacks.harness import aws_examples, load_example, policy_context, program
from tests.stacks.test_cluster_prod import endpoints_prod


def _bastion_dev() -> ClusterSpec:
    spec = load_example("dev")
    return spec.model_copy(
        update={"provider": spec.provider.model_copy(update={"connection": "ssh-bastion"})}
    )


def _with_import_path() -> ClusterSpec:
    spec = load_example("prod")
    fsx = spec.storage.fsx_lustre.model_copy(update={"import_path": "s3://datasets/train"})
    return spec.model_copy(update={"storage": spec.storage.model_copy(update={"fsx_lustre": fsx})})


def _with_login() -> ClusterSpec:
    spec = load_example("dev")
    login = spec.pool("head").model_copy(update={"name": "login", "role": "login"})
    return spec.model_copy(update={"node_pools": [*spec.node_pools, login]})


def _partition() -> ClusterSpec:
    spec = load_example("prod")
    group = {"placement_group": PlacementGroup(strategy="partition", partition_count=4)}
    return spec.model_copy(
        update={"node_pools": [p.model_copy(update=group) if p.role == "gpu" else p for p in spec.node_pools]}
    )


VARIANTS: dict[str, Callable[[], ClusterSpec]] = {
    name: (lambda n=name: load_example(n)) for name in aws_examples()
}
VARIANTS["dev-ssh-bastion"] = _bastion_dev
VARIANTS["prod-fsx-dra"] = _with_import_path
VARIANTS["dev-login-node"] = _with_login
VARIANTS["prod-partition-group"] = _partition
VARIANTS["prod-endpoints"] = endpoints_prod


def test_examples_cover_prod_and_dev():
    assert {"prod", "dev"} <= set(aws_examples())


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pulumi.runtime.test
def test_every_policy_passes(variant: str):
    async def check():
        spec = VARIANTS[variant]()
        graph = await program(spec)
        assert len(graph.resources) > 20
        violations = p.check(graph.resources, policy_context(spec))
        assert [v.render() for v in violations] == []
        nodes = {i.name for i in graph.of(p.INSTANCE)} - {"bastion-001"}
        assert nodes == {n for pool in spec.node_pools for n in spec.node_names(pool)}

    return check()


@pulumi.runtime.test
def test_partition_group_spreads_nodes_over_its_partitions():
    async def check():
        graph = await program(_partition())
        (pg,) = graph.of(p.PLACEMENT_GROUP)
        assert (pg.inputs["strategy"], pg.inputs["partitionCount"]) == ("partition", 4)
        gpu = sorted((i for i in graph.of(p.INSTANCE) if i.name.startswith("gpu-")), key=lambda i: i.name)
        assert [i.inputs["placementPartitionNumber"] for i in gpu] == [1, 2, 3, 4] * 4

    return check()


# --- each rule, broken -------------------------------------------------------------------------


def _mutate(resources: list[p.Resource], match: Callable[[p.Resource], bool], change: Callable[[dict], None]):
    """A copy of ``resources`` where ``change`` edits the inputs of every resource ``match``es."""
    out, hits = [], 0
    for res in resources:
        if match(res):
            inputs = copy.deepcopy(res.inputs)
            change(inputs)
            res, hits = replace(res, inputs=inputs), hits + 1
        out.append(res)
    assert hits, "mutation matched nothing: the test would prove nothing"
    return out


def _drop(resources: list[p.Resource], match: Callable[[p.Resource], bool]) -> list[p.Resource]:
    out = [r for r in resources if not match(r)]
    assert len(out) < len(resources), "nothing dropped: the test would prove nothing"
    return out


def _named(type_: str, name: str) -> Callable[[p.Resource], bool]:
    return lambda r: r.type == type_ and r.name == name


def _set(path: list[str], value: object) -> Callable[[dict], None]:
    def change(inputs: dict) -> None:
        node = inputs
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


GRAPH_MUTATIONS: dict[str, tuple[str, str, Callable[[list[p.Resource]], list[p.Resource]]]] = {
    "endpoint-https-from-anywhere": (
        "prod-endpoints",
        "no-open-ingress",
        lambda rs: _mutate(rs, _named(p.INGRESS, "prod-endpoints-https"), _set(["cidrIpv4"], "0.0.0.0/0")),
    ),
    "ssh-from-unlisted-cidr": (
        "dev",
        "no-open-ingress",
        lambda rs: _mutate(rs, _named(p.INGRESS, "dev-admin-ssh-0"), _set(["cidrIpv4"], "198.51.100.0/24")),
    ),
    "all-egress-to-internet": (
        "dev",
        "no-open-ingress",
        lambda rs: _mutate(rs, _named(p.EGRESS, "dev-egress-443"), _set(["ipProtocol"], "-1")),
    ),
    "efa-group-without-self-ingress": (
        "prod",
        "efa-fabric",
        lambda rs: _drop(rs, _named(p.INGRESS, "prod-cluster-self-in")),
    ),
    "efa-node-outside-placement-group": (
        "prod",
        "efa-fabric",
        lambda rs: _mutate(rs, _named(p.INSTANCE, "gpu-007"), _set(["placementGroup"], "other-group")),
    ),
    "imdsv1-allowed": (
        "prod",
        "imdsv2",
        lambda rs: _mutate(
            rs, _named(p.LAUNCH_TEMPLATE, "prod-head"), _set(["metadataOptions", "httpTokens"], "optional")
        ),
    ),
    "unencrypted-root-volume": (
        "dev",
        "encryption",
        lambda rs: _mutate(
            rs,
            _named(p.LAUNCH_TEMPLATE, "dev-gpu"),
            lambda i: i["blockDeviceMappings"][0]["ebs"].update(encrypted="false"),
        ),
    ),
    "scratch-1-file-system": (
        "prod",
        "encryption",
        lambda rs: _mutate(rs, lambda r: r.type == p.LUSTRE, _set(["deploymentType"], "SCRATCH_1")),
    ),
    "bucket-without-sse": ("prod", "encryption", lambda rs: _drop(rs, lambda r: r.type == p.BUCKET_SSE)),
    "bucket-public-policy-allowed": (
        "dev",
        "public-access-blocked",
        lambda rs: _mutate(rs, lambda r: r.type == p.BUCKET_PAB, _set(["restrictPublicBuckets"], False)),
    ),
    "untagged-security-group": (
        "prod",
        "tagged",
        lambda rs: _mutate(rs, _named(p.SG, "prod-fsx"), lambda i: i.pop("tags")),
    ),
    "instance-without-node-tag": (
        "dev",
        "tagged",
        lambda rs: _mutate(rs, _named(p.INSTANCE, "gpu-002"), lambda i: i["tags"].pop("clusterforge:node")),
    ),
}


@pytest.mark.parametrize("case", sorted(GRAPH_MUTATIONS))
@pulumi.runtime.test
def test_broken_program_fails_its_policy(case: str):
    stack, policy, mutate = GRAPH_MUTATIONS[case]

    async def check():
        spec = VARIANTS[stack]()
        graph = await program(spec)
        ctx = policy_context(spec)
        assert p.check(graph.resources, ctx, only=[policy]) == []  # the unbroken program passes
        violations = p.check(mutate(graph.resources), ctx)
        assert violations, f"{case}: no policy failed"
        assert {v.policy for v in violations} == {policy}

    return check()


def _no_placement_group() -> ClusterSpec:
    spec = load_example("prod")
    pools = [pool.model_copy(update={"placement_group": None}) for pool in spec.node_pools]
    return spec.model_copy(update={"node_pools": pools})


def _admin_cidr_everywhere() -> ClusterSpec:
    spec = load_example("dev")
    return spec.model_copy(
        update={"provider": spec.provider.model_copy(update={"admin_cidrs": ["0.0.0.0/0"]})}
    )


SPEC_MUTATIONS = {
    "efa-pool-without-placement-group": (_no_placement_group, "efa-fabric", "outside a placement group"),
    "admin-cidr-is-the-internet": (_admin_cidr_everywhere, "no-open-ingress", "ingress from 0.0.0.0/0"),
}


@pytest.mark.parametrize("case", sorted(SPEC_MUTATIONS))
@pulumi.runtime.test
def test_broken_spec_fails_its_policy(case: str):
    make, expected, message = SPEC_MUTATIONS[case]

    async def check():
        spec = make()
        graph = await program(spec)
        violations = p.check(graph.resources, policy_context(spec))
        assert {v.policy for v in violations} == {expected}, [v.render() for v in violations]
        assert all(message in v.message for v in violations)

    return check()
