"""The stack outputs, resolved under the mocks, are what the AWS inventory turns into the
provider ``Node`` list, and that list renders into the shared Ansible inventory."""

from __future__ import annotations

import pulumi
from components.cluster import build_cluster, export_cluster

from clusterforge.inventory import render_hosts
from clusterforge.providers.aws.inventory import SSM_CONNECTION, nodes_from_outputs
from tests.stacks.harness import MOCK_AMI, MOCKS, load_example


@pulumi.runtime.test
def test_prod_outputs_become_nodes_and_an_inventory():
    async def check():
        spec = load_example("prod")
        MOCKS.reset()
        outputs = await pulumi.Output.from_input(export_cluster(spec, build_cluster(spec))).future()
        assert outputs["region"] == "us-east-1" and outputs["connection"] == "ssm"
        assert (
            outputs["fsx"]["dns_name"].endswith(".amazonaws.com") and outputs["fsx"]["mount_point"] == "/fsx"
        )
        assert outputs["bucket"].startswith("clusterforge-prod-ckpt-")
        assert outputs["transfer_bucket"].startswith("clusterforge-prod-ssm-")
        assert outputs["ami"] == MOCK_AMI and outputs["fsx"]["id"]

        nodes = nodes_from_outputs(spec, outputs)
        assert [n.name for n in nodes] == ["head-001"] + [f"gpu-{i:03d}" for i in range(1, 17)]
        gpu = nodes[1]
        assert (gpu.pool, gpu.role, gpu.instance_type) == ("gpu", "gpu", "p5.48xlarge")
        assert gpu.provider_id.startswith("i-") and gpu.address.startswith("10.0.")
        assert gpu.connection == {
            "ansible_connection": SSM_CONNECTION,
            "ansible_host": gpu.provider_id,
            "ansible_aws_ssm_instance_id": gpu.provider_id,
            "ansible_aws_ssm_region": "us-east-1",
            "ansible_aws_ssm_bucket_name": outputs["transfer_bucket"],
            "ansible_aws_ssm_bucket_sse_mode": "aws:kms",
        }
        assert len({n.address for n in nodes}) == len(nodes)

        groups = render_hosts(nodes)["all"]["children"]
        assert list(groups["slurm_controller"]["hosts"]) == ["head-001"]
        assert len(groups["gpu_nodes"]["hosts"]) == 16

    return check()


@pulumi.runtime.test
def test_bastion_stack_exports_the_bastion_and_ssh_jump_vars():
    async def check():
        dev = load_example("dev")
        spec = dev.model_copy(
            update={"provider": dev.provider.model_copy(update={"connection": "ssh-bastion"})}
        )
        MOCKS.reset()
        outputs = await pulumi.Output.from_input(export_cluster(spec, build_cluster(spec))).future()
        assert outputs["bastion"] == "198.51.100.10"
        nodes = nodes_from_outputs(spec, outputs)
        assert [n.name for n in nodes] == ["head-001", "gpu-001", "gpu-002"]  # the bastion is not a node
        assert nodes[1].connection["ansible_ssh_common_args"].startswith("-o ProxyJump=ubuntu@198.51.100.10")
        assert nodes[1].connection["ansible_host"] == nodes[1].address

    return check()
