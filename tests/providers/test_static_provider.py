"""The static provider: inventory to Nodes, SSH settings shared by Ansible and clusterforge's own
commands, `down` refused, and `invoke up --dry-run` on a static spec (the issue's reproduction)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clusterforge.catalog import load_hardware
from clusterforge.inventory import render_inventory
from clusterforge.node.remote import command_prefix, node_runner
from clusterforge.providers import ProviderError, get_provider
from clusterforge.providers.base import Node
from clusterforge.providers.static import StaticProvider
from clusterforge.providers.static.inventory import InventoryHost, read_inventory
from clusterforge.providers.static.nodes import static_nodes
from clusterforge.providers.static.ssh import HostSsh
from clusterforge.spec.models import Nfs, StaticSsh, Storage
from tests.providers.static_fakes import fake_ssh, spec, write_inventory

HW = load_hardware()
ROOT = Path(__file__).resolve().parents[2]
INVOKE = Path(sys.executable).parent / "invoke"


# --- the inventory ---------------------------------------------------------------------------


def test_variables_merge_all_then_group_vars_then_host(tmp_path: Path) -> None:
    path = write_inventory(
        tmp_path,
        {
            "gpu-001": {"ansible_host": "10.0.0.21", "ansible_user": "ops"},
            "gpu-002": {"ansible_host": "10.0.0.22"},
        },
        all_vars={"ansible_user": "ubuntu", "ansible_port": 2200},
    )
    (tmp_path / "group_vars" / "gpu_nodes").mkdir(parents=True)
    (tmp_path / "group_vars" / "gpu_nodes" / "ssh.yml").write_text("ansible_port: 2222\n")
    hosts = {h.name: h for h in read_inventory(path)}
    assert hosts["head-001"].role == "head" and hosts["head-001"].variables["ansible_port"] == 2200
    assert hosts["gpu-001"].variables["ansible_user"] == "ops"
    assert hosts["gpu-002"].variables["ansible_user"] == "ubuntu"
    assert hosts["gpu-002"].variables["ansible_port"] == 2222
    assert hosts["gpu-002"].address == "10.0.0.22"


def test_the_example_inventory_reads() -> None:
    hosts = read_inventory(ROOT / "inventories" / "static-example" / "hosts.yml")
    assert [(h.name, h.role, h.address) for h in hosts] == [
        ("head-001", "head", "192.0.2.10"),
        ("gpu-001", "gpu", "192.0.2.21"),
        ("gpu-002", "gpu", "192.0.2.22"),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[gpu_nodes]\ngpu-001 ansible_host=10.0.0.21 : x\n", "not YAML"),
        ("gpu_nodes: {hosts: {gpu-001: {}}}\n", "no 'all:' group"),
        ("all: {children: {other: {hosts: {gpu-001: {}}}}}\n", "host gpu-001: in none of the groups"),
        (
            "all: {children: {gpu_nodes: {hosts: {n1: {}}}, slurm_controller: {hosts: {n1: {}}}}}\n",
            "host n1: in several role groups (gpu, head)",
        ),
    ],
)
def test_bad_inventories_say_file_host_and_fix(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "hosts.yml"
    path.write_text(text)
    with pytest.raises(ProviderError) as err:
        read_inventory(path)
    assert str(err.value).startswith(f"{path}: ") and says in str(err.value)


def test_a_host_variable_given_twice_is_an_error_with_its_line(tmp_path: Path) -> None:
    # PyYAML keeps the last ansible_host silently: the node would be reached at the wrong address.
    text = (ROOT / "inventories" / "static-example" / "hosts.yml").read_text()
    old = "          ansible_host: 192.0.2.21\n"
    assert text.count(old) == 1
    path = tmp_path / "hosts.yml"
    path.write_text(text.replace(old, old + "          ansible_host: 192.0.2.99\n"))
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if "192.0.2.99" in t)
    with pytest.raises(ProviderError) as err:
        read_inventory(path)
    assert str(err.value) == (
        f"{path}:{line}: all.children.gpu_nodes.hosts.gpu-001.ansible_host: duplicate key 'ansible_host' "
        f"(first at line {line - 1}); YAML would silently keep only the last one: remove one of them"
    )


def test_a_duplicate_key_in_group_vars_is_an_error(tmp_path: Path) -> None:
    path = write_inventory(tmp_path, {"gpu-001": {"ansible_host": "10.0.0.21"}})
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("ansible_port: 22\nansible_port: 2222\n")
    with pytest.raises(ProviderError, match=r"group_vars/all.yml:2: ansible_port: duplicate key"):
        read_inventory(path)


# --- hosts to nodes ----------------------------------------------------------------------------


def test_nodes_carry_pool_hardware_and_ssh_settings(tmp_path: Path) -> None:
    path = write_inventory(
        tmp_path,
        {"gpu-001": {"ansible_host": "10.0.0.21", "clusterforge_instance_type": "dgx-h100"}},
        all_vars={"ansible_user": "ubuntu"},
    )
    nodes, problems = static_nodes(
        spec(path, gpu_count=1, private_key="keys/id_ed25519"), read_inventory(path), HW
    )
    assert problems == []
    gpu = nodes[1]
    assert (gpu.name, gpu.role, gpu.pool, gpu.instance_type, gpu.address) == (
        "gpu-001",
        "gpu",
        "gpu",
        "dgx-h100",
        "10.0.0.21",
    )
    conn = gpu.connection
    assert conn["ansible_connection"] == "ssh" and conn["ansible_user"] == "ubuntu"
    assert conn["ansible_ssh_private_key_file"] == str(ROOT / "keys" / "id_ed25519")
    # Ansible runs with ANSIBLE_HOST_KEY_CHECKING=False: the per-host option turns it back on.
    assert conn["ansible_ssh_host_key_checking"] == "true"
    assert "StrictHostKeyChecking=yes" in shlex.split(conn["ansible_ssh_common_args"])


def test_pool_counts_and_unknown_pools_are_named(tmp_path: Path) -> None:
    path = write_inventory(
        tmp_path,
        {
            "gpu-001": {},
            "gpu-002": {"clusterforge_pool": "gpus"},
            "gpu-003": {"clusterforge_instance_type": "h100x"},
        },
    )
    _, problems = static_nodes(spec(path, gpu_count=3), read_inventory(path), HW)
    messages = [p.message for p in problems]
    assert any(m.startswith("gpu-002: clusterforge_pool 'gpus' is not a pool of the spec") for m in messages)
    assert any(
        m.startswith("gpu-003: hardware 'h100x' is not in clusterforge/data/hardware.yaml") for m in messages
    )
    assert any(
        m.startswith("pool gpu: count 3 but the inventory gives it 2 host(s) (gpu-001, gpu-003)")
        for m in messages
    )


def test_a_fleet_of_thousands_of_hosts_maps_in_one_pass(tmp_path: Path) -> None:
    hosts = [InventoryHost("head-001", "head", {"ansible_host": "10.0.0.1"})] + [
        InventoryHost(f"gpu-{i:04d}", "gpu", {"ansible_host": f"10.{i // 250}.{i % 250}.10"})
        for i in range(4000)
    ]
    nodes, problems = static_nodes(spec(tmp_path / "hosts.yml", gpu_count=4000), hosts, HW)
    assert problems == [] and len(nodes) == 4001
    assert len({n.provider_id for n in nodes}) == 4001
    # The rendered inventory takes them as it takes container and cloud nodes.
    inv = render_inventory(spec(tmp_path / "hosts.yml", gpu_count=4000), nodes, tmp_path / "munge.key")
    assert len(inv.hosts["all"]["children"]["gpu_nodes"]["hosts"]) == 4000


# --- one set of SSH settings for Ansible and for clusterforge's own commands ------------------


def _node(variables: dict[str, object], **defaults: object) -> Node:
    host = InventoryHost("gpu-001", "gpu", {"ansible_host": "10.0.0.21", **variables})
    ssh = HostSsh.resolve(host, StaticSsh(**defaults))  # type: ignore[arg-type]
    return Node("gpu-001", ssh.address, "gpu", "gpu", "local", ssh.connection())


def test_remote_commands_use_the_same_host_key_policy_key_and_jump_host(tmp_path: Path) -> None:
    node = _node(
        {"ansible_user": "ops", "ansible_port": 2200},
        private_key="/keys/id",
        known_hosts="/site/known_hosts",
        jump_host="admin@bastion.example:2022",
    )
    argv = command_prefix(node)
    assert argv[0] == "ssh" and argv[-2:] == ["10.0.0.21", "--"]
    assert argv[argv.index("-p") + 1] == "2200" and argv[argv.index("-l") + 1] == "ops"
    assert argv[argv.index("-i") + 1] == "/keys/id"
    assert "StrictHostKeyChecking=yes" in argv and "UserKnownHostsFile=/site/known_hosts" in argv
    proxy = next(a for a in argv if a.startswith("ProxyCommand="))
    inner = shlex.split(proxy.removeprefix("ProxyCommand="))
    # The jump host is held to the same policy and key (ProxyJump would not pass -o options on).
    assert inner[:1] == ["ssh"] and "StrictHostKeyChecking=yes" in inner and "/keys/id" in inner
    assert inner[-5:] == ["-l", "admin", "-W", "%h:%p", "bastion.example"] and "2022" in inner
    # Ansible gets exactly the same options.
    common = shlex.split(node.connection["ansible_ssh_common_args"])
    assert argv[1 : 1 + len(common)] == common


def test_trust_on_first_use_only_when_the_spec_says_so() -> None:
    assert "StrictHostKeyChecking=yes" in command_prefix(_node({}))
    assert "StrictHostKeyChecking=accept-new" in command_prefix(_node({}, host_keys="trust-on-first-use"))
    assert not any("=no" in a for a in command_prefix(_node({}, host_keys="trust-on-first-use")))


def test_remote_commands_go_through_sudo_when_become_is_set(tmp_path: Path) -> None:
    stub = tmp_path / "ssh"
    stub.write_text('#!/bin/sh\nfor a; do last="$a"; done\nprintf "%s" "$last"\n')
    stub.chmod(0o755)
    env = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{tmp_path}{os.pathsep}{env}"
    try:
        rc, out, _ = node_runner(_node({}, become=True))(["scontrol", "update", "reason=a b"])
        _, plain, _ = node_runner(_node({}, become=False))(["sinfo"])
    finally:
        os.environ["PATH"] = env
    assert rc == 0 and shlex.split(out) == ["sudo", "-n", "--", "scontrol", "update", "reason=a b"]
    assert plain == "sinfo"


# --- the provider as the pipeline sees it ------------------------------------------------------


def test_get_provider_finds_static_and_down_is_refused(tmp_path: Path) -> None:
    path = write_inventory(tmp_path, {"gpu-001": {"ansible_host": "10.0.0.21"}})
    the_spec = spec(path, gpu_count=1)
    provider = get_provider(the_spec)
    assert isinstance(provider, StaticProvider)
    assert [(p.name, p.action) for p in provider.plan(the_spec)] == [
        ("head-001", "keep"),
        ("gpu-001", "keep"),
    ]
    with pytest.raises(ProviderError, match="clusterforge did not create its machines"):
        provider.destroy(the_spec)


def test_create_reruns_nothing_after_a_passed_preflight_and_refuses_after_a_failed_one(
    tmp_path: Path,
) -> None:
    path = write_inventory(tmp_path / "site", {"gpu-001": {"ansible_host": "10.0.0.21"}})
    the_spec = spec(path, gpu_count=1)
    provider = StaticProvider(rendered=tmp_path / "r")
    with fake_ssh(tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "probe-root"}) as log:
        assert provider.preflight(the_spec) == []
        (log / "10.0.0.21.argv").unlink()
        assert [n.name for n in provider.create(the_spec)] == ["head-001", "gpu-001"]
        assert not (log / "10.0.0.21.argv").exists()  # no second probe
    failing = StaticProvider(rendered=tmp_path / "r")
    with (
        fake_ssh(tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "bad-key"}),
        pytest.raises(ProviderError, match="gpu-001: 10.0.0.21:22 refused the key"),
    ):
        failing.create(the_spec)


def _invoke(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if not INVOKE.exists():
        pytest.skip(f"no invoke next to {sys.executable}")
    full = {**os.environ, **env}
    full.pop("CLUSTERFORGE_DEBUG", None)
    return subprocess.run(
        [str(INVOKE), *args], cwd=ROOT, capture_output=True, text=True, timeout=120, env=full, check=False
    )


def _lab(tmp_path: Path) -> Path:
    write_inventory(tmp_path / "site", {"gpu-001": {"ansible_host": "10.0.0.21"}})
    the_spec = spec(tmp_path / "site" / "hosts.yml", gpu_count=1, user="root")
    data = the_spec.model_dump(mode="json", exclude_defaults=True)
    data["provider"]["kind"] = "static"
    data["stack"] = f"lab{os.getpid() % 100000}"
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.slow
def test_invoke_up_dry_run_on_a_static_spec_plans_the_hosts(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    with fake_ssh(tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "probe-root"}):
        result = _invoke(["up", "--spec", str(lab), "--dry-run"], dict(os.environ))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "head-001" in result.stdout and "gpu-001" in result.stdout and "keep" in result.stdout


@pytest.mark.slow
def test_invoke_up_dry_run_names_the_unusable_host(tmp_path: Path) -> None:
    lab = _lab(tmp_path)
    with fake_ssh(tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "probe-no-sudo"}):
        result = _invoke(["up", "--spec", str(lab), "--dry-run"], dict(os.environ))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "error: gpu-001: cfnosudo cannot sudo without a password" in " ".join(result.stdout.split())


@pytest.mark.slow
def test_invoke_down_refuses_a_static_stack(tmp_path: Path) -> None:
    result = _invoke(["down", "--spec", str(_lab(tmp_path)), "--yes"], {})
    assert result.returncode == 2
    assert "is static: clusterforge did not create its machines" in result.stderr + result.stdout


# --- what a static stack renders: NFS shared storage, the declared fabric --------------------


def test_nfs_renders_for_the_role_and_the_node_checks(tmp_path: Path) -> None:
    from clusterforge.node.config import render_node_config

    path = write_inventory(tmp_path, {"gpu-001": {"ansible_host": "10.0.0.21"}})
    the_spec = spec(path, gpu_count=1).model_copy(
        update={
            "storage": Storage(nfs=Nfs(server="10.0.0.5", export="/export/shared", mount_point="/shared"))
        }
    )
    nodes, _ = static_nodes(the_spec, read_inventory(path), HW)
    inv = render_inventory(the_spec, nodes, tmp_path / "munge.key")
    assert inv.group_vars["shared_storage"] == {
        "shared_storage_kind": "nfs",
        "shared_storage_mount_point": "/shared",
        "shared_storage_nfs_server": "10.0.0.5",
        "shared_storage_nfs_export": "/export/shared",
    }
    config = render_node_config(the_spec, nodes[1])
    assert config["shared_storage"] == {"path": "/shared", "require_mount": True}


def test_a_dgx_node_expects_its_eight_400g_ports(tmp_path: Path) -> None:
    from clusterforge.node.config import render_node_config

    path = write_inventory(tmp_path, {"gpu-001": {"ansible_host": "10.0.0.21"}})
    the_spec = spec(path, gpu_count=1, gpu_type="dgx-h100")
    nodes, _ = static_nodes(the_spec, read_inventory(path), HW)
    config = render_node_config(the_spec, nodes[1])
    assert config["infiniband"] == {"count": 8, "rate_gbps": 400.0}
    assert config["gpu"]["count"] == 8 and config["gpu"]["nvlink_links_per_gpu"] == 18
    head = render_node_config(the_spec, nodes[0], profile="quick")
    assert "infiniband" not in head  # the head (a container type here) declares no fabric
