"""The AWS stack's outputs as the provider ``Node`` list (what ``clusterforge.inventory``
renders into hosts.yml), with the connection the spec asks for:

- ``ssm``: Ansible's SSM connection plugin (``amazon.aws.aws_ssm``; ``community.aws.aws_ssm`` is
  now a redirect to it), addressed by instance id, no inbound port at all; file transfers go
  through the stack's unversioned SSM transfer bucket (a versioned one keeps every copied file
  in its history, as the plugin's own notes warn), KMS-encrypted as its default encryption asks;
- ``ssh-bastion``: plain SSH to the private address, jumping through the stack's bastion.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterforge.providers.base import Node
from clusterforge.spec.models import AwsProvider, ClusterSpec

SSM_CONNECTION = "amazon.aws.aws_ssm"
# The default login user of the OS images the spec can name.
LOGIN_USERS = {"ubuntu-22.04": "ubuntu", "ubuntu-24.04": "ubuntu", "debian-12": "admin"}


class OutputsError(ValueError):
    """The stack outputs lack what the inventory needs; the message names the key."""


def connection_vars(spec: ClusterSpec, outputs: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, str]:
    provider = spec.provider
    if not isinstance(provider, AwsProvider):
        raise ValueError(f"stack {spec.stack!r} is not an AWS stack")
    if provider.connection == "ssm":
        conn = {
            "ansible_connection": SSM_CONNECTION,
            "ansible_host": node["instance_id"],
            "ansible_aws_ssm_instance_id": node["instance_id"],
            "ansible_aws_ssm_region": provider.region,
        }
        bucket = outputs.get("transfer_bucket")
        if not bucket:
            raise OutputsError(
                f"stack {spec.stack!r}: connection is ssm but the outputs have no 'transfer_bucket' "
                "(the aws_ssm connection copies files through it); run `invoke up` to create it"
            )
        conn["ansible_aws_ssm_bucket_name"] = str(bucket)
        conn["ansible_aws_ssm_bucket_sse_mode"] = "aws:kms"
        return conn
    bastion = outputs.get("bastion")
    if not bastion:
        raise OutputsError(
            f"stack {spec.stack!r}: connection is ssh-bastion but the outputs have no 'bastion' address"
        )
    user = LOGIN_USERS[spec.software.os_image]
    return {
        "ansible_connection": "ssh",
        "ansible_host": node["private_ip"],
        "ansible_user": user,
        "ansible_ssh_common_args": f"-o ProxyJump={user}@{bastion} -o StrictHostKeyChecking=accept-new",
        # The pipeline runs Ansible with ANSIBLE_HOST_KEY_CHECKING=False (container nodes have no
        # host keys), which puts `-o StrictHostKeyChecking=no` before these arguments; ssh keeps
        # the first value, so accept-new above would never apply. This turns checking back on for
        # this host (measured with a private sshd: see clusterforge/providers/static/ssh.py).
        "ansible_ssh_host_key_checking": "true",
    }


def nodes_from_outputs(spec: ClusterSpec, outputs: Mapping[str, Any]) -> list[Node]:
    """Every node of the stack outputs, in spec pool order then by name."""
    raw = outputs.get("nodes")
    if raw is None:
        return []  # the stack has never been brought up
    order = {pool.name: i for i, pool in enumerate(spec.node_pools)}
    nodes = []
    for entry in raw:
        missing = [
            k
            for k in ("name", "instance_id", "private_ip", "pool", "role", "instance_type")
            if not entry.get(k)
        ]
        if missing:
            raise OutputsError(
                f"stack output 'nodes' entry {entry.get('name', '?')!r} lacks {', '.join(missing)}"
            )
        nodes.append(
            Node(
                name=entry["name"],
                address=entry["private_ip"],
                pool=entry["pool"],
                role=entry["role"],
                instance_type=entry["instance_type"],
                connection=connection_vars(spec, outputs, entry),
                provider_id=entry["instance_id"],
            )
        )
    return sorted(nodes, key=lambda n: (order.get(n.pool, len(order)), n.name))
