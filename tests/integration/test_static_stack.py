"""A static stack over SSH: existing machines (here container nodes running sshd) named in a
hand-written inventory go through `invoke up`: preflight over SSH, configured by the roles over
SSH, certified, admitted; a second `up` changes nothing; a host whose declared hardware is wrong
fails preflight by name before anything is touched.

Its own containers (1 head + 2 compute, from ``container_stack``), not the shared local stack:
the shared stack's nodes are reached with ``podman exec`` and configured by the local provider's
spec, while this test needs machines that only SSH reaches, under a static spec. The containers
are unprivileged, so no NFS can be served or mounted here: the profile skips ``shared-storage``
and ``checkpoint-restart`` (the NFS path is tested by its rendering, tests/providers/).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.fixtures.nodes import LocalStack
from tests.integration.stack import ROOT, cf

pytestmark = pytest.mark.integration

SKIPPED = ["shared-storage", "checkpoint-restart"]  # no NFS in unprivileged containers (docstring)


def _sshd(stack: LocalStack, node: str, public_key: str) -> str:
    """openssh-server on one node, root's key authorised; returns its ed25519 host key line."""
    stack.exec(
        node,
        "sh",
        "-c",
        "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
        "--no-install-recommends openssh-server >/dev/null && systemctl enable --now ssh",
        timeout=900,
    )
    stack.exec(
        node,
        "sh",
        "-c",
        f"install -d -m 700 /root/.ssh && printf '%s\\n' '{public_key}' > /root/.ssh/authorized_keys "
        "&& chmod 600 /root/.ssh/authorized_keys",
    )
    # Read over the engine, a channel that is not SSH: what the known_hosts file is checked against.
    kind, key = stack.exec(node, "cat", "/etc/ssh/ssh_host_ed25519_key.pub").split()[:2]
    return f"{stack.node(node).address} {kind} {key}"


def _inventory(folder: Path, stack: LocalStack, wrong: dict[str, str] | None = None) -> Path:
    def host(name: str) -> dict[str, str]:
        out = {"ansible_host": stack.node(name).address}
        if wrong and name in wrong:
            out["clusterforge_instance_type"] = wrong[name]
        return out

    data = {
        "all": {
            "children": {
                "slurm_controller": {"hosts": {"head-001": host("head-001")}},
                "gpu_nodes": {"hosts": {n: host(n) for n in ("node-001", "node-002")}},
                "login_nodes": {"hosts": {}},
            }
        }
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "hosts.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _spec(path: Path, name: str, inventory: Path, key: Path, known_hosts: Path) -> Path:
    """stacks/local.yaml's software and profile under a static provider reaching the hosts as root."""
    spec = yaml.safe_load((ROOT / "stacks" / "local.yaml").read_text())
    spec["stack"] = name
    spec["provider"] = {
        "kind": "static",
        "inventory": str(inventory),
        "ssh": {"user": "root", "private_key": str(key), "known_hosts": str(known_hosts), "become": False},
    }
    spec.pop("storage", None)
    for pool in spec["node_pools"]:
        pool["count"] = 2 if pool["role"] == "gpu" else 1
    for profile in spec["certification"]["profiles"].values():
        profile["skip_checks"] = sorted({*profile.get("skip_checks", []), *SKIPPED})
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_static_stack_over_ssh(container_stack: Callable[..., LocalStack], tmp_path: Path) -> None:
    stack = container_stack(2, head=True)
    assert sorted(n.name for n in stack.nodes) == ["head-001", "node-001", "node-002"]
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    public = (tmp_path / "id_ed25519.pub").read_text().strip()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(_sshd(stack, n.name, public) + "\n" for n in stack.nodes))

    name = f"st{os.getpid()}"
    env = dict(os.environ, CLUSTERFORGE_STATE_DIR=str(tmp_path / "state"))
    for var in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP"):
        env[var] = str(tmp_path / var.lower())
    good = _spec(tmp_path / "good.yaml", name, _inventory(tmp_path / "site", stack), key, known_hosts)
    bad_inventory = _inventory(tmp_path / "site-bad", stack, wrong={"node-002": "dgx-h100"})
    bad = _spec(tmp_path / "bad.yaml", name, bad_inventory, key, known_hosts)
    try:
        # A wrong declared fact stops `up` at preflight, naming the host, before anything is touched.
        refused = cf("up", "--spec", str(bad), env=env, timeout=300)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        text = " ".join(refused.stdout.split())
        assert "error: node-002: declared dgx-h100, GPUs: expected 8 H100, found 0" in text
        assert "node-001:" not in text and "head-001:" not in text
        assert not list((tmp_path / "state" / name).glob("journal.*"))

        first = cf("up", "--spec", str(good), env=env, timeout=2400)
        assert first.returncode == 0, "the first `invoke up` of the static stack failed"
        states = _sinfo(stack)
        assert states == {"node-001": ("idle", "none"), "node-002": ("idle", "none")}, states

        again = cf("up", "--spec", str(good), env=env, timeout=1200)
        assert again.returncode == 0
        assert "Ansible changes: 0;" in again.stdout

        status = cf("status", "--spec", str(good), "--json", env=env, timeout=300)
        assert status.returncode == 0, status.stderr
        down = cf("down", "--spec", str(good), "--yes", env=env, timeout=120)
        assert down.returncode == 2 and "is static" in down.stderr + down.stdout
    finally:
        shutil.rmtree(ROOT / "inventories" / name, ignore_errors=True)


def _sinfo(stack: LocalStack) -> dict[str, tuple[str, str]]:
    out = stack.exec("head-001", "sinfo", "-h", "-N", "-o", "%N %T %E")
    rows = {}
    for line in out.splitlines():
        node, state, reason = (line.split(None, 2) + [""])[:3]
        rows[node] = (state, reason)
    return rows
