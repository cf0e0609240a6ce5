"""The `prod` example (16 x p5.48xlarge in a capacity reservation) under Pulumi's mocks."""

from __future__ import annotations

import json

import pulumi

from clusterforge.catalog import load_hardware
from clusterforge.providers.aws import policy as p
from clusterforge.spec.models import ClusterSpec
from tests.stacks.harness import MOCK_AMI, load_example, program


def _gpu_template(graph: p.Graph) -> p.Resource:
    (lt,) = [r for r in graph.of(p.LAUNCH_TEMPLATE) if r.name == "prod-gpu"]
    return lt


@pulumi.runtime.test
def test_sixteen_gpu_instances_share_the_reservations_placement_group():
    async def check():
        graph = await program(load_example("prod"))
        gpu = [i for i in graph.of(p.INSTANCE) if i.inputs["tags"]["clusterforge:pool"] == "gpu"]
        assert sorted(i.name for i in gpu) == [f"gpu-{n:03d}" for n in range(1, 17)]
        # prod names the cluster group its capacity reservation was made in: the stack creates none
        (group,) = {i.inputs["placementGroup"] for i in gpu}
        assert group == "prod-gpu-reserved"
        assert not [r for r in graph.of(p.PLACEMENT_GROUP)]
        assert all(i.inputs["launchTemplate"]["id"] == _gpu_template(graph).id for i in gpu)

    return check()


@pulumi.runtime.test
def test_launch_template_lays_out_one_ena_and_32_efa_on_32_cards():
    async def check():
        graph = await program(load_example("prod"))
        nics = _gpu_template(graph).inputs["networkInterfaces"]
        ena = [n for n in nics if n["interfaceType"] == "interface"]
        efa = [n for n in nics if n["interfaceType"] == "efa-only"]
        assert len(nics) == 33 and len(ena) == 1 and len(efa) == 32
        assert (ena[0]["networkCardIndex"], ena[0]["deviceIndex"]) == (0, 0)
        slots = {(n["networkCardIndex"], n["deviceIndex"]) for n in efa}
        assert slots == {(0, 1)} | {(card, 0) for card in range(1, 32)}
        assert (
            len({n["networkCardIndex"] for n in efa}) == load_hardware()["p5.48xlarge"].network.network_cards
        )
        cluster_sg = next(r.id for r in graph.of(p.SG) if r.name == "prod-cluster")
        assert all(n["securityGroups"] == [cluster_sg] for n in efa)
        assert cluster_sg in ena[0]["securityGroups"]

    return check()


@pulumi.runtime.test
def test_imdsv2_encrypted_root_and_capacity_reservation_on_gpu_template():
    async def check():
        spec = load_example("prod")
        graph = await program(spec)
        lt = _gpu_template(graph).inputs
        assert lt["metadataOptions"]["httpTokens"] == "required"
        (root,) = lt["blockDeviceMappings"]
        assert root["ebs"]["encrypted"] == "true"
        assert (root["ebs"]["volumeSize"], root["ebs"]["volumeType"], root["ebs"]["iops"]) == (
            1024,
            "gp3",
            16000,
        )
        target = lt["capacityReservationSpecification"]["capacityReservationTarget"]
        assert target["capacityReservationId"] == spec.pool("gpu").capacity_reservation_id
        assert "instanceMarketOptions" not in lt  # an ODCR, not a Capacity Block
        assert lt["imageId"] == MOCK_AMI
        assert all(
            t.inputs["metadataOptions"]["httpTokens"] == "required" for t in graph.of(p.LAUNCH_TEMPLATE)
        )

    return check()


@pulumi.runtime.test
def test_fsx_lustre_and_its_security_group_rules():
    async def check():
        graph = await program(load_example("prod"))
        (fs,) = graph.of(p.LUSTRE)
        assert fs.inputs["deploymentType"] == "PERSISTENT_2"
        assert fs.inputs["storageCapacity"] == 48000 and fs.inputs["perUnitStorageThroughput"] == 250
        (fsx_sg,) = fs.inputs["securityGroupIds"]
        cluster_sg = next(r.id for r in graph.of(p.SG) if r.name == "prod-cluster")
        ingress = {
            (r.inputs["fromPort"], r.inputs["toPort"], r.inputs["referencedSecurityGroupId"])
            for r in graph.of(p.INGRESS)
            if r.inputs["securityGroupId"] == fsx_sg
        }
        assert ingress == {
            (lo, hi, peer) for lo, hi in ((988, 988), (1018, 1023)) for peer in (fsx_sg, cluster_sg)
        }
        to_fsx = {
            (r.inputs["fromPort"], r.inputs["toPort"])
            for r in graph.of(p.EGRESS)
            if r.inputs["securityGroupId"] == cluster_sg
            and r.inputs.get("referencedSecurityGroupId") == fsx_sg
        }
        assert to_fsx == {(988, 988), (1018, 1023)}
        # No import_path in prod: no data repository association.
        assert not [r for r in graph.resources if r.type.startswith("aws:fsx/dataRepositoryAssociation")]

    return check()


@pulumi.runtime.test
def test_checkpoint_bucket_private_encrypted_versioned_with_lifecycle():
    async def check():
        graph = await program(load_example("prod"))
        (bucket,) = [b for b in graph.of(p.BUCKET) if b.name == "prod-checkpoints"]
        attached = {
            r.type.rsplit(":", 1)[-1]: r.inputs
            for r in graph.resources
            if r.inputs.get("bucket") == bucket.id
        }
        block = attached["BucketPublicAccessBlock"]
        assert all(
            block[k] is True
            for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
        )
        rule = attached["BucketServerSideEncryptionConfiguration"]["rules"][0]
        assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
        assert attached["BucketVersioning"]["versioningConfiguration"]["status"] == "Enabled"
        (life,) = attached["BucketLifecycleConfiguration"]["rules"]
        assert life["status"] == "Enabled" and life["noncurrentVersionExpiration"]["noncurrentDays"] == 30
        assert attached["BucketOwnershipControls"]["rule"]["objectOwnership"] == "BucketOwnerEnforced"

    return check()


@pulumi.runtime.test
def test_instance_role_has_ssm_core_and_only_the_checkpoint_bucket():
    async def check():
        graph = await program(load_example("prod"))
        buckets = {b.name: b for b in graph.of(p.BUCKET)}
        attachments = [
            r.inputs["policyArn"]
            for r in graph.resources
            if r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
        ]
        assert attachments == ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]
        inline = [r for r in graph.resources if r.type == "aws:iam/rolePolicy:RolePolicy"]
        resources = {
            res
            for policy in inline
            for st in json.loads(policy.inputs["policy"])["Statement"]
            for res in [st["Resource"]]
        }
        # Only the checkpoint bucket: the SSM transfer bucket is reached through presigned URLs.
        arn = f"arn:aws:s3:::{buckets['prod-checkpoints'].id}"
        assert resources == {arn, f"{arn}/*"}

    return check()


def endpoints_prod() -> ClusterSpec:
    """prod without internet egress: VPC endpoints only, on a pre-baked image."""
    spec = load_example("prod")
    provider = spec.provider.model_copy(
        update={"egress": "endpoints", "ami": "ami-0fedcba9876543210", "ami_prebaked": True}
    )
    return spec.model_copy(update={"provider": provider})


def _endpoint_services(graph: p.Graph) -> list[str]:
    return sorted(
        r.inputs["serviceName"] for r in graph.resources if r.type == "aws:ec2/vpcEndpoint:VpcEndpoint"
    )


@pulumi.runtime.test
def test_no_ssh_ingress_nat_and_an_s3_gateway_endpoint():
    async def check():
        graph = await program(load_example("prod"))  # admin_cidrs: [], egress: nat
        assert not [r for r in graph.of(p.INGRESS) if r.inputs.get("fromPort") == 22]
        assert [r for r in graph.resources if r.type == "aws:ec2/natGateway:NatGateway"]
        # Checkpoint traffic must not pay the NAT gateway's per-GB charge.
        assert _endpoint_services(graph) == ["com.amazonaws.us-east-1.s3"]
        (s3,) = [r for r in graph.resources if r.type == "aws:ec2/vpcEndpoint:VpcEndpoint"]
        private = next(r.id for r in graph.resources if r.name == "prod-private" and "routeTable:" in r.type)
        assert s3.inputs["vpcEndpointType"] == "Gateway" and s3.inputs["routeTableIds"] == [private]

    return check()


@pulumi.runtime.test
def test_endpoints_mode_has_no_nat_and_the_ssm_endpoints():
    async def check():
        graph = await program(endpoints_prod())
        assert not [r for r in graph.resources if r.type == "aws:ec2/natGateway:NatGateway"]
        assert _endpoint_services(graph) == [
            f"com.amazonaws.us-east-1.{s}" for s in ("ec2messages", "s3", "ssm", "ssmmessages")
        ]

    return check()
