"""Run one command on a node, chosen from the node's Ansible connection vars.

Admission talks to Slurm many times per node (sinfo, scontrol); an Ansible run per call would
cost a second or more each, so commands go straight through the same transport Ansible uses:
``podman exec`` / ``docker exec`` for container nodes, ``ssh`` for machines, SSM Run Command for
EC2 nodes Ansible reaches with ``amazon.aws.aws_ssm`` (clusterforge.node.ssm), a local process for
``ansible_connection: local``. Returns ``(rc, stdout, stderr)`` like the runner the admission code
and the validators expect; one interface for admission, liveness, the drift probe and rollouts.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from typing import Any

from clusterforge.ansible.runner import PODMAN_CONNECTION
from clusterforge.node.ssm import SSM_CONNECTIONS, SsmRunner
from clusterforge.providers.base import Node
from clusterforge.providers.local.engine import EngineName, engine_for

Runner = Callable[[list[str]], tuple[int, str, str]]


class RemoteError(Exception):
    pass


_ENGINES: dict[str, EngineName] = {
    PODMAN_CONNECTION: "podman",  # the local provider's
    "containers.podman.podman": "podman",
    "community.docker.docker": "docker",
}


def command_env(node: Node) -> dict[str, str] | None:
    """The environment for the transport: the project's engine configuration for container
    nodes (never the machine's own), the caller's environment otherwise."""
    kind = node.connection.get("ansible_connection", "ssh")
    if kind in _ENGINES:
        name = _ENGINES[kind]
        return engine_for(name, node.connection.get(f"ansible_{name}_executable")).environ()
    return None


def command_prefix(node: Node, interactive: bool = False) -> list[str]:
    conn = node.connection
    kind = conn.get("ansible_connection", "ssh")
    host = conn.get("ansible_host", node.name)
    if kind in _ENGINES:
        name = _ENGINES[kind]
        engine = engine_for(name, conn.get(f"ansible_{name}_executable"))
        return engine.argv("exec", *(["-i"] if interactive else []), host)
    if kind == "local":
        return []
    if kind in ("ssh", "ansible.builtin.ssh", "paramiko"):
        return ssh_prefix(conn, host)
    raise RemoteError(
        f"{node.name}: cannot run commands over ansible_connection {kind!r} "
        f"(supported: {', '.join(_ENGINES)}, ssh, {', '.join(SSM_CONNECTIONS)}, local)"
    )


def ssh_prefix(conn: dict[str, str], host: str) -> list[str]:
    """``ssh ... host --`` with the same settings Ansible uses for the node: its common and extra
    args (host-key policy, known_hosts, jump host: clusterforge/providers/static/ssh.py writes
    them), key file, port and user. Options come first: ssh keeps the first value of each."""
    argv = ["ssh", *shlex.split(conn.get("ansible_ssh_common_args", ""))]
    argv += shlex.split(conn.get("ansible_ssh_extra_args", ""))
    argv += ["-o", "BatchMode=yes"]
    if conn.get("ansible_port"):
        argv += ["-p", str(conn["ansible_port"])]
    if conn.get("ansible_ssh_private_key_file"):
        argv += ["-i", conn["ansible_ssh_private_key_file"]]
    if conn.get("ansible_user"):
        argv += ["-l", conn["ansible_user"]]
    return [*argv, host, "--"]


def become_prefix(node: Node) -> list[str]:
    """``sudo -n --`` for a node whose connection says ``ansible_become`` (a non-root SSH user):
    admission's scontrol and the validators need root, as the roles do."""
    conn = node.connection
    if str(conn.get("ansible_become", "")).lower() not in ("1", "true", "yes", "on"):
        return []
    user = conn.get("ansible_become_user", "root")
    return ["sudo", "-n", *(["-u", user] if user != "root" else []), "--"]


def ssm_runner(node: Node, timeout_s: float = 120.0, **seams: Any) -> SsmRunner:
    """A runner over SSM Run Command for a node whose connection is the aws_ssm plugin's."""
    conn = node.connection
    instance = conn.get("ansible_aws_ssm_instance_id") or conn.get("ansible_host") or node.provider_id
    region = conn.get("ansible_aws_ssm_region", "")
    if not instance.startswith("i-") or not region:
        raise RemoteError(
            f"{node.name}: an SSM node needs its instance id (ansible_host i-...) and ansible_aws_ssm_region; "
            f"got {instance!r} and {region!r}"
        )
    bucket = conn.get("ansible_aws_ssm_bucket_name", "")
    return SsmRunner(instance, region, timeout_s, bucket, **seams)


def node_runner(node: Node, timeout_s: float = 120.0) -> Runner:
    """A runner executing argv on ``node``; a command that outlives ``timeout_s`` returns rc 124."""

    if node.connection.get("ansible_connection") in SSM_CONNECTIONS:
        return ssm_runner(node, timeout_s)
    env = command_env(node)

    def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        prefix = command_prefix(node, interactive=stdin is not None)
        # ssh joins its arguments into one shell line: quote them so argv survives.
        tail = [shlex.join([*become_prefix(node), *argv])] if prefix[:1] == ["ssh"] else argv
        try:
            proc = subprocess.run(
                [*prefix, *tail],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                env=env,
            )
        except subprocess.TimeoutExpired:
            return 124, "", f"timed out after {timeout_s:g} s: {' '.join(argv)}"
        except FileNotFoundError as exc:
            return 127, "", f"{exc.filename}: not found"
        return proc.returncode, proc.stdout, proc.stderr

    return run
