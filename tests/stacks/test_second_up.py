"""What a second `pulumi up`, a node replacement and a destroy do, judged on the mocked graph:
a new AMI release or a template edit replaces no node, reserved nodes are deleted before their
replacement, FSx waits for every Lustre rule, buckets survive as `invoke down` decides."""

from __future__ import annotations

import json

import pulumi

from clusterforge.providers.aws import policy as p
from clusterforge.spec.models import ClusterSpec, NodePool, RootVolume
from tests.stacks.harness import MOCK_AMI, changed_instances, load_example, policy_context, program

NEW_AMI = "ami-0aaaaaaaaaaaaaaa1"  # what the SSM parameter answers after an image release


def _gpu(spec: ClusterSpec, **changes: object) -> ClusterSpec:
    pools = [pool.model_copy(update=changes) if pool.role == "gpu" else pool for pool in spec.node_pools]
    return spec.model_copy(update={"node_pools": pools})


def _template(graph: p.Graph, name: str) -> p.Resource:
    (lt,) = [r for r in graph.of(p.LAUNCH_TEMPLATE) if r.name == name]
    return lt


@pulumi.runtime.test
def test_a_new_ssm_ami_on_the_second_run_replaces_no_instance():
    async def check():
        spec = load_example("prod")
        first = await program(spec)  # first run: the SSM value, which the provider then records
        second = await program(spec, ssm_ami=NEW_AMI, recorded_ami=MOCK_AMI)
        assert _template(second, "prod-gpu").inputs["imageId"] == MOCK_AMI
        assert changed_instances(first, second) == []
        # Without the record the program would follow SSM: a new template version per pool.
        unrecorded = await program(spec, ssm_ami=NEW_AMI)
        assert _template(unrecorded, "prod-gpu").inputs["imageId"] == NEW_AMI
        assert (
            _template(unrecorded, "prod-gpu").inputs != _template(first, "prod-gpu").inputs
        )  # AWS makes a new version
        assert changed_instances(first, unrecorded) == []  # ...and still no node is replaced

    return check()


@pulumi.runtime.test
def test_the_spec_ami_wins_over_the_record():
    async def check():
        spec = load_example("prod")
        pinned = spec.model_copy(update={"provider": spec.provider.model_copy(update={"ami": NEW_AMI})})
        graph = await program(pinned, recorded_ami=MOCK_AMI)
        assert {lt.inputs["imageId"] for lt in graph.of(p.LAUNCH_TEMPLATE)} == {NEW_AMI}

    return check()


@pulumi.runtime.test
def test_a_template_edit_never_silently_replaces_nodes():
    async def check():
        spec = load_example("prod")
        first = await program(spec)
        bigger = _gpu(
            spec, root_volume=RootVolume(size_gib=2048, type="gp3", iops=16000, throughput_mibps=1000)
        )
        second = await program(bigger)
        assert _template(second, "prod-gpu").inputs != _template(first, "prod-gpu").inputs
        assert changed_instances(first, second) == []
        gpu = [i for i in second.of(p.INSTANCE) if i.name.startswith("gpu-")]
        assert all("launchTemplate.version" in i.options["ignoreChanges"] for i in gpu)

    return check()


@pulumi.runtime.test
def test_pinning_a_template_version_is_the_explicit_rollout():
    async def check():
        spec = load_example("prod")
        before = await program(_gpu(spec, launch_template_version=3))
        after = await program(_gpu(spec, launch_template_version=4))
        gpu = [f"gpu-{n:03d}" for n in range(1, 17)]
        assert changed_instances(before, after) == gpu  # every pool node, shown by the preview
        assert {i.inputs["launchTemplate"]["version"] for i in after.of(p.INSTANCE) if i.name in gpu} == {"4"}
        assert all(
            "launchTemplate.version" not in i.options["ignoreChanges"]
            for i in after.of(p.INSTANCE)
            if i.name in gpu
        )

    return check()


@pulumi.runtime.test
def test_reserved_nodes_are_deleted_before_their_replacement():
    async def check():
        spec = load_example("prod")
        block = _gpu(spec, capacity_reservation_id=None, capacity_block_id="cr-0123456789abcdef0")
        for variant in (spec, block):
            graph = await program(variant)
            dbr = {i.name: i.options["deleteBeforeReplace"] for i in graph.of(p.INSTANCE)}
            assert dbr.pop("head-001") is False  # on demand: create the new one first
            assert set(dbr.values()) == {True} and len(dbr) == 16

    return check()


@pulumi.runtime.test
def test_fsx_depends_on_every_lustre_rule():
    async def check():
        graph = await program(load_example("prod"))
        (fs,) = graph.of(p.LUSTRE)
        (fsx_sg,) = fs.inputs["securityGroupIds"]
        rules = [
            r
            for r in graph.of(p.INGRESS) + graph.of(p.EGRESS)
            if fsx_sg in (r.inputs.get("securityGroupId"), r.inputs.get("referencedSecurityGroupId"))
        ]
        assert len(rules) == 12  # 2 port ranges x (in, out) x (self, nodes) + the node side's 4
        assert {r.options["urn"] for r in rules} <= set(fs.options["dependencies"])

    return check()


@pulumi.runtime.test
def test_capacity_block_without_a_placement_group_builds_and_passes():
    async def check():
        spec = _gpu(
            load_example("prod"),
            capacity_reservation_id=None,
            capacity_block_id="cr-0123456789abcdef0",
            placement_group=None,
        )
        graph = await program(spec)
        assert not graph.of(p.PLACEMENT_GROUP)
        assert p.check(graph.resources, policy_context(spec)) == []
        # The same pool outside a Capacity Block still needs its group.
        odcr = _gpu(load_example("prod"), placement_group=None)
        assert {v.policy for v in p.check((await program(odcr)).resources, policy_context(odcr))} == {
            "efa-fabric"
        }

    return check()


@pulumi.runtime.test
def test_an_existing_placement_group_is_used_not_created():
    async def check():
        spec = load_example("prod")
        named = _gpu(
            spec, placement_group=spec.pool("gpu").placement_group.model_copy(update={"name": "odcr-pg"})
        )
        graph = await program(named)
        assert not graph.of(p.PLACEMENT_GROUP)
        gpu = [i for i in graph.of(p.INSTANCE) if i.name.startswith("gpu-")]
        assert {i.inputs["placementGroup"] for i in gpu} == {"odcr-pg"}

    return check()


@pulumi.runtime.test
def test_ssm_transfer_bucket_is_unversioned_and_short_lived():
    async def check():
        for stack in ("prod", "dev"):
            graph = await program(load_example(stack))
            (bucket,) = [b for b in graph.of(p.BUCKET) if b.name == f"{stack}-ssm-transfer"]
            attached = {
                r.type.rsplit(":", 1)[-1]: r for r in graph.resources if r.inputs.get("bucket") == bucket.id
            }
            assert "BucketVersioning" not in attached
            (rule,) = attached["BucketLifecycleConfiguration"].inputs["rules"]
            assert rule["expiration"]["days"] == 1 and rule["status"] == "Enabled"
            assert bucket.inputs["forceDestroy"] is True

    return check()


@pulumi.runtime.test
def test_no_transfer_bucket_without_ssm():
    async def check():
        dev = load_example("dev")
        spec = dev.model_copy(
            update={"provider": dev.provider.model_copy(update={"connection": "ssh-bastion"})}
        )
        graph = await program(spec)
        assert [b.name for b in graph.of(p.BUCKET)] == ["dev-checkpoints"]

    return check()


@pulumi.runtime.test
def test_checkpoint_bucket_and_its_settings_outlive_pulumi_destroy():
    async def check():
        graph = await program(load_example("prod"))
        (bucket,) = [b for b in graph.of(p.BUCKET) if b.name == "prod-checkpoints"]
        kept = [r for r in graph.resources if r is bucket or r.inputs.get("bucket") == bucket.id]
        assert len(kept) == 6 and all(r.options["retainOnDelete"] for r in kept)

    return check()


@pulumi.runtime.test
def test_bastion_has_no_access_to_the_checkpoint_bucket():
    async def check():
        dev = load_example("dev")
        spec = dev.model_copy(
            update={"provider": dev.provider.model_copy(update={"connection": "ssh-bastion"})}
        )
        graph = await program(spec)
        (bastion,) = [i for i in graph.of(p.INSTANCE) if i.name == "bastion-001"]
        lt = graph.by_id[bastion.inputs["launchTemplate"]["id"]]
        assert "iamInstanceProfile" not in lt.inputs and "iamInstanceProfile" not in bastion.inputs
        assert p.check(graph.resources, policy_context(spec), only=["bastion-unprivileged"]) == []
        # The policy fails the old program, where the bastion inherited the node profile.
        node_profile = {"name": "dev-node"}
        broken = [
            p.Resource(r.type, r.name, r.id, {**r.inputs, "iamInstanceProfile": node_profile}, r.options)
            if r is lt
            else r
            for r in graph.resources
        ]
        (violation,) = p.check(broken, policy_context(spec), only=["bastion-unprivileged"])
        assert violation.resource == "bastion-001"

    return check()


@pulumi.runtime.test
def test_instance_role_trusts_the_partitions_ec2_principal():
    async def check():
        spec = load_example("dev")
        china = spec.model_copy(
            update={
                "provider": spec.provider.model_copy(
                    update={"region": "cn-north-1", "availability_zone": "cn-north-1a"}
                )
            }
        )
        for variant, principal in ((spec, "ec2.amazonaws.com"), (china, "ec2.amazonaws.com.cn")):
            graph = await program(variant)
            (role,) = [r for r in graph.resources if r.type == "aws:iam/role:Role"]
            (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
            assert statement["Principal"] == {"Service": principal}

    return check()


def test_pool_model_keeps_the_new_keys_optional():
    pool = NodePool(name="gpu", role="gpu", instance_type="p5.48xlarge", count=1)
    assert pool.launch_template_version is None


@pulumi.runtime.test
def test_a_baked_pool_boots_its_own_ami_and_the_rest_the_stacks():
    async def check():
        spec = _gpu(load_example("prod"), image="baked")
        graph = await program(spec, recorded_ami=MOCK_AMI, pool_images={"gpu": NEW_AMI})
        assert _template(graph, "prod-gpu").inputs["imageId"] == NEW_AMI
        others = {
            lt.name: lt.inputs["imageId"] for lt in graph.of(p.LAUNCH_TEMPLATE) if lt.name != "prod-gpu"
        }
        assert others and set(others.values()) == {MOCK_AMI}  # the head keeps the stack's AMI

    return check()
