"""Run one command on a node, chosen from the node's Ansible connection vars.

Admission talks to Slurm many times per node (sinfo, scontrol); an Ansible run per call would
cost a second or more each, so commands go straight through the same transport Ansible uses:
``podman exec`` / ``docker exec`` for container nodes, ``ssh`` for machines, a local process
for ``ansible_connection: local``. Returns ``(rc, stdout, stderr)`` like the runner the
admission code and the validators expect.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable

from clusterforge.providers.base import Node
from clusterforge.providers.local.engine import engine_for

Runner = Callable[[list[str]], tuple[int, str, str]]


class RemoteError(Exception):
    pass


_ENGINES = {"containers.podman.podman": "podman", "community.docker.docker": "docker"}


def command_env(node: Node) -> dict[str, str] | None:
    """The environment for the transport: the project's engine configuration for container
    nodes (never the machine's own), the caller's environment otherwise."""
    kind = node.connection.get("ansible_connection", "ssh")
    if kind in _ENGINES:
        name = _ENGINES[kind]
        return engine_for(name, node.connection.get(f"ansible_{name}_executable")).environ()  # type: ignore[arg-type]
    return None


def command_prefix(node: Node, interactive: bool = False) -> list[str]:
    conn = node.connection
    kind = conn.get("ansible_connection", "ssh")
    host = conn.get("ansible_host", node.name)
    if kind in _ENGINES:
        name = _ENGINES[kind]
        engine = engine_for(name, conn.get(f"ansible_{name}_executable"))  # type: ignore[arg-type]
        return engine.argv("exec", *(["-i"] if interactive else []), host)
    if kind == "local":
        return []
    if kind in ("ssh", "ansible.builtin.ssh", "paramiko"):
        argv = ["ssh", "-o", "BatchMode=yes"]
        if conn.get("ansible_port"):
            argv += ["-p", str(conn["ansible_port"])]
        if conn.get("ansible_user"):
            argv += ["-l", conn["ansible_user"]]
        return [*argv, host, "--"]
    raise RemoteError(
        f"{node.name}: cannot run commands over ansible_connection {kind!r} yet "
        "(supported: containers.podman.podman, community.docker.docker, ssh, local)"
    )


def node_runner(node: Node, timeout_s: float = 120.0) -> Runner:
    """A runner executing argv on ``node``; a command that outlives ``timeout_s`` returns rc 124."""

    env = command_env(node)

    def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        prefix = command_prefix(node, interactive=stdin is not None)
        # ssh joins its arguments into one shell line: quote them so argv survives.
        tail = [shlex.join(argv)] if prefix[:1] == ["ssh"] else argv
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

    return run  # type: ignore[return-value]
