"""Stack outputs -> provider Node list: connection vars per the spec, and clear errors."""

from __future__ import annotations

import pytest

from clusterforge.providers.aws.inventory import OutputsError, nodes_from_outputs
from clusterforge.spec.loader import load_spec, stack_path


def _entry(name: str, pool: str, role: str, ip: str) -> dict:
    return {
        "name": name,
        "pool": pool,
        "role": role,
        "instance_type": "g5.xlarge" if role == "gpu" else "m7i.xlarge",
        "instance_id": f"i-0{name.replace('-', '')}",
        "private_ip": ip,
        "availability_zone": "us-west-2a",
    }


OUTPUTS = {
    "region": "us-west-2",
    "connection": "ssm",
    "bucket": None,
    "transfer_bucket": "clusterforge-dev-ssm-0001",
    "nodes": [
        _entry("gpu-002", "gpu", "gpu", "10.0.0.6"),
        _entry("gpu-001", "gpu", "gpu", "10.0.0.5"),
        _entry("head-001", "head", "head", "10.0.32.4"),
    ],
}


def test_nodes_in_pool_order_with_ssm_vars_through_the_transfer_bucket():
    spec, _ = load_spec(stack_path("dev"))
    nodes = nodes_from_outputs(spec, {**OUTPUTS, "bucket": "clusterforge-dev-ckpt-0001"})
    assert [n.name for n in nodes] == ["head-001", "gpu-001", "gpu-002"]
    assert nodes[1].connection == {
        "ansible_connection": "amazon.aws.aws_ssm",
        "ansible_host": "i-0gpu001",
        "ansible_aws_ssm_instance_id": "i-0gpu001",
        "ansible_aws_ssm_region": "us-west-2",
        # never the (versioned) checkpoint bucket: copied files would stay in its history
        "ansible_aws_ssm_bucket_name": "clusterforge-dev-ssm-0001",
        "ansible_aws_ssm_bucket_sse_mode": "aws:kms",
    }
    assert (nodes[1].address, nodes[1].provider_id, nodes[1].state) == ("10.0.0.5", "i-0gpu001", "running")


def test_ssm_without_a_transfer_bucket_says_what_is_missing():
    spec, _ = load_spec(stack_path("dev"))
    with pytest.raises(OutputsError, match="no 'transfer_bucket'"):
        nodes_from_outputs(spec, {**OUTPUTS, "transfer_bucket": None})


def test_never_brought_up_is_no_nodes():
    spec, _ = load_spec(stack_path("dev"))
    assert nodes_from_outputs(spec, {}) == []


def test_entry_without_address_names_the_node_and_key():
    spec, _ = load_spec(stack_path("dev"))
    broken = {**OUTPUTS, "nodes": [{**OUTPUTS["nodes"][0], "private_ip": ""}]}
    with pytest.raises(OutputsError, match=r"'gpu-002' lacks private_ip"):
        nodes_from_outputs(spec, broken)


def test_bastion_connection_needs_the_bastion_output():
    spec, _ = load_spec(stack_path("dev"))
    spec = spec.model_copy(
        update={"provider": spec.provider.model_copy(update={"connection": "ssh-bastion"})}
    )
    with pytest.raises(OutputsError, match="no 'bastion' address"):
        nodes_from_outputs(spec, OUTPUTS)


def test_bastion_nodes_check_host_keys_despite_the_pipelines_default():
    spec, _ = load_spec(stack_path("dev"))
    spec = spec.model_copy(
        update={"provider": spec.provider.model_copy(update={"connection": "ssh-bastion"})}
    )
    nodes = nodes_from_outputs(spec, {**OUTPUTS, "bastion": "203.0.113.9"})
    for node in nodes:
        assert "StrictHostKeyChecking=accept-new" in node.connection["ansible_ssh_common_args"]
        # without this, ANSIBLE_HOST_KEY_CHECKING=False puts StrictHostKeyChecking=no first and wins
        assert node.connection["ansible_ssh_host_key_checking"] == "true"
