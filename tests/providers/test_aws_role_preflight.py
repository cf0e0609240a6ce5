"""The prod inventory, rendered as the AWS provider renders it from the stack outputs, satisfies
every role's argument spec and preflight asserts on every kind of host the playbooks configure.

No node: the inventory is written from outputs shaped like ``stacks/components/cluster.export_cluster``
writes them, read back with ``ansible-inventory``, then a playbook on this machine
(``ansible_connection: local``) runs, per host and per role of ``playbooks/node_software.yml`` and
``playbooks/cluster.yml`` (with the play's role vars), the role's ``validate_argument_spec`` and its
``tasks/preflight.yml`` (which only assert), with the role's vars for the spec's OS image.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import yaml

from clusterforge.inventory import Inventory, render_inventory, write_inventory
from clusterforge.plan.inputs import RUN_GROUPS
from clusterforge.providers.aws.inventory import nodes_from_outputs
from clusterforge.providers.base import Node
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.spec.models import ClusterSpec, LocalScratch, Storage

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = ("node_software.yml", "cluster.yml")
# Facts of an EC2 node per OS image (the kernel: the image's linux-aws / cloud kernel).
NODE_FACTS = {
    "ubuntu-22.04": {
        "distribution": "Ubuntu",
        "distribution_version": "22.04",
        "distribution_major_version": "22",
        "os_family": "Debian",
        "kernel": "6.8.0-1021-aws",
        "architecture": "x86_64",
    },
    "ubuntu-24.04": {
        "distribution": "Ubuntu",
        "distribution_version": "24.04",
        "distribution_major_version": "24",
        "os_family": "Debian",
        "kernel": "6.8.0-1024-aws",
        "architecture": "x86_64",
    },
    "debian-12": {
        "distribution": "Debian",
        "distribution_version": "12.12",
        "distribution_major_version": "12",
        "os_family": "Debian",
        "kernel": "6.1.0-40-cloud-amd64",
        "architecture": "x86_64",
    },
}
OS_VARS = {"ubuntu-22.04": "Ubuntu-22.04", "ubuntu-24.04": "Ubuntu-24.04", "debian-12": "Debian-12"}


def prod_outputs(spec: ClusterSpec) -> dict[str, Any]:
    """Stack outputs as export_cluster writes them, for the spec's pools (ids and addresses made up)."""
    nodes = []
    for p, pool in enumerate(spec.node_pools):
        for i, name in enumerate(spec.node_names(pool)):
            nodes.append(
                {
                    "name": name,
                    "pool": pool.name,
                    "role": pool.role,
                    "instance_type": pool.instance_type,
                    "instance_id": f"i-0{p:02d}{i:014x}",
                    "private_ip": f"10.0.{p}.{10 + i}",
                    "availability_zone": "us-east-1a",
                }
            )
    fsx = spec.storage.fsx_lustre
    return {
        "region": "us-east-1",
        "availability_zone": "us-east-1a",
        "connection": "ssm",
        "nodes": nodes,
        "fsx": {
            "id": "fs-0123456789abcdef0",
            "dns_name": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
            "mount_name": "abcdefgh",
            "mount_point": fsx.mount_point if fsx else "",
        },
        "bucket": "clusterforge-prod-ckpt-0123",
        "transfer_bucket": "clusterforge-prod-xfer-0123",
        "bastion": None,
        "ami": "ami-0123456789abcdef0",
    }


def _role_entries(playbook: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(hosts pattern, role, the play's role vars) for every role of every play."""
    entries = []
    for play in yaml.safe_load(playbook.read_text()):
        for role in play.get("roles", []):
            name = role["role"] if isinstance(role, dict) else role
            entries.append(
                (play["hosts"], name, dict(role.get("vars", {})) if isinstance(role, dict) else {})
            )
    return entries


def _groups(inventory: Path, env: dict[str, str]) -> tuple[dict[str, list[str]], dict[str, dict[str, Any]]]:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(inventory), "--list"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    data = json.loads(out.stdout)
    groups = {g: v.get("hosts", []) for g, v in data.items() if isinstance(v, dict) and "hosts" in v}
    groups["all"] = sorted(data["_meta"]["hostvars"])
    return groups, data["_meta"]["hostvars"]


def _options(role: str) -> dict[str, Any]:
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"]


def _role_vars(role: str) -> dict[str, Any]:
    path = REPO / "roles" / role / "vars" / "main.yml"
    return (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}


def _case(
    host: str, role: str, role_vars: dict[str, Any], os_image: str, hostvars: dict[str, Any]
) -> dict[str, Any]:
    options = _options(role)
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    # Every option as the host sees it: the play's role vars, else the inventory's value, else the default.
    provided = {k: role_vars.get(k, hostvars.get(k, defaults.get(k))) for k in options}
    os_vars = REPO / "roles" / role / "vars" / f"{OS_VARS[os_image]}.yml"
    tasks: list[dict[str, Any]] = []
    if os_vars.is_file():
        tasks.append({"name": "Load the OS vars", "ansible.builtin.include_vars": str(os_vars)})
    tasks += [
        {
            "name": "Validate the argument spec",
            "ansible.builtin.validate_argument_spec": {
                "argument_spec": options,
                "provided_arguments": provided,
            },
            # What the defaults are built from, resolved as inside the role.
            "vars": {
                **defaults,
                **{k: hostvars[k] for k in defaults if k in hostvars},
                **role_vars,
                **_role_vars(role),
            },
        },
        {
            "name": "Run the preflight",
            "ansible.builtin.include_role": {"name": role, "tasks_from": "preflight"},
            "vars": role_vars,
        },
        {"name": "Accepted", "ansible.builtin.debug": {"msg": f"CASE {host}/{role} ACCEPTED"}},
    ]
    return {
        "name": f"Case {host}/{role}",
        "when": f"inventory_hostname == '{host}'",
        "block": tasks,
        "rescue": [
            {
                "name": "Refused",
                "ansible.builtin.debug": {
                    "msg": f"CASE {host}/{role} REFUSED: {{{{ ansible_failed_result.msg }}}}"
                },
            }
        ],
    }


def preflight_verdicts(spec: ClusterSpec, outputs: dict[str, Any], work: Path) -> dict[str, str]:
    nodes = nodes_from_outputs(spec, outputs)
    inv = render_inventory(spec, nodes, work / "munge.key", outputs=outputs)
    hosts = write_inventory(inv, work / "inventory")
    home = work / "ansible-home"
    env = {
        **os.environ,
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_REMOTE_TMP": str(home / "remote-tmp"),
    }
    groups, hostvars = _groups(hosts, env)
    # One host of each group is enough: hosts of a group get the same variables.
    sample = {group: members[:1] for group, members in groups.items() if group != "all"}
    sample["all"] = sorted(
        {h for g in ("slurm_controller", "gpu_nodes", "login_nodes") for h in sample.get(g, [])}
    )
    tasks = []
    for playbook in PLAYBOOKS:
        for pattern, role, role_vars in _role_entries(REPO / "playbooks" / playbook):
            # A group the run makes (group_by) holds hosts of an inventory group.
            for host in sample.get(RUN_GROUPS.get(pattern, pattern), []):
                tasks.append(_case(host, role, role_vars, spec.software.os_image, hostvars[host]))
    targets = sorted({h for members in sample.values() for h in members})
    # playbook_dir/../validators is where validators_runtime finds the suite.
    (work / "play").mkdir()
    (work / "validators").symlink_to(REPO / "validators")
    playbook = work / "play" / "preflight.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Every role's preflight on the rendered prod inventory",
                    "hosts": ",".join(targets),
                    "gather_facts": False,
                    # This machine stands in for every node, with the facts of the spec's OS image on
                    # EC2: nothing is changed, only asserted.
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": sys.executable,
                        "ansible_facts": NODE_FACTS[spec.software.os_image],
                    },
                    "tasks": tasks,
                }
            ],
            sort_keys=False,
        )
    )
    result = ansible_runner.run(
        private_data_dir=str(work),
        playbook=str(playbook),
        inventory=str(hosts),
        envvars={
            **{k: env[k] for k in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TMP")},
            "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
            "ANSIBLE_NOCOLOR": "1",
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        },
        quiet=True,
    )
    assert result.rc == 0, (work / "artifacts").as_posix()
    verdicts: dict[str, str] = {}
    for event in result.events:
        res = (event.get("event_data") or {}).get("res") or {}
        msg = res.get("msg")
        if event.get("event") == "runner_on_ok" and isinstance(msg, str) and msg.startswith("CASE "):
            case, verdict = msg[5:].split(" ", 1)
            verdicts[case] = verdict
        assert not (event.get("event") == "runner_on_ok" and res.get("changed")), event
    return verdicts


@pytest.fixture(scope="module")
def prod() -> ClusterSpec:
    spec, _ = load_spec(stack_path("prod"))
    return spec


@pytest.mark.slow
def test_prod_inventory_passes_every_roles_preflight(prod: ClusterSpec, tmp_path: Path) -> None:
    verdicts = preflight_verdicts(prod, prod_outputs(prod), tmp_path)
    roles = {role for pb in PLAYBOOKS for _, role, _ in _role_entries(REPO / "playbooks" / pb)}
    assert {case.split("/")[1] for case in verdicts} == roles  # every role ran somewhere
    assert {case.split("/")[0] for case in verdicts} == {"head-001", "gpu-001"}
    refused = {case: v for case, v in verdicts.items() if v != "ACCEPTED"}
    assert not refused, refused


@pytest.mark.slow
def test_without_the_fsx_outputs_the_storage_preflight_names_them(prod: ClusterSpec, tmp_path: Path) -> None:
    outputs = {**prod_outputs(prod), "fsx": None}
    verdicts = preflight_verdicts(prod, outputs, tmp_path)
    for host in ("head-001", "gpu-001"):
        verdict = verdicts[f"{host}/shared_storage"]
        assert verdict.startswith("REFUSED") and "shared_storage_fsx_dns_name" in verdict, verdict


# --- the AWS-only roles: in the playbooks, switched on by the inventory for AWS only ----------------

AWS_ONLY = ("local_scratch", "cluster_hosts")


def _read_back(inv: Inventory, work: Path) -> dict[str, dict[str, Any]]:
    """Every host's variables as Ansible sees them (ansible-inventory over the written folder)."""
    hosts = write_inventory(inv, work / "inventory")
    home = work / "ansible-home"
    env = {**os.environ, "ANSIBLE_HOME": str(home), "ANSIBLE_LOCAL_TEMP": str(home / "tmp")}
    return _groups(hosts, env)[1]


def _enabled(hostvars: dict[str, Any], role: str) -> bool:
    """The role's switch on a host: the inventory's value, else the role's default."""
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
    return hostvars.get(f"{role}_enabled", defaults[f"{role}_enabled"])


def _local_nodes() -> list[Node]:
    podman = {"ansible_connection": "podman_pipelined", "ansible_host": "local-x"}
    return [
        Node("head-001", "10.89.42.2", "head", "head", "local", podman),
        Node("node-001", "10.89.42.11", "node", "gpu", "local", podman),
    ]


def test_the_aws_only_roles_run_before_what_needs_them() -> None:
    software = [(h, r) for h, r, _ in _role_entries(REPO / "playbooks" / "node_software.yml")]
    cluster = [(h, r) for h, r, _ in _role_entries(REPO / "playbooks" / "cluster.yml")]
    # /scratch on the compute nodes (every machine) before enroot's folders and validators_runtime
    # (the node software, skipped on nodes whose baked image holds it).
    assert ("gpu_nodes", "local_scratch") in software
    roles = [r for _, r in software]
    assert roles.index("local_scratch") < roles.index("container_runtime") < roles.index("validators_runtime")
    assert ("node_software_needed", "container_runtime") in software
    # Names in /etc/hosts on every node before Slurm.
    first_slurm = min(i for i, (_, role) in enumerate(cluster) if role == "slurm")
    assert cluster.index(("all", "cluster_hosts")) < first_slurm
    site = [
        p["ansible.builtin.import_playbook"]
        for p in yaml.safe_load((REPO / "playbooks/site.yml").read_text())
    ]
    assert site == ["node_software.yml", "cluster.yml"]


@pytest.mark.slow
def test_the_prod_inventory_from_the_stack_outputs_switches_them_on(
    prod: ClusterSpec, tmp_path: Path
) -> None:
    outputs = prod_outputs(prod)
    inv = render_inventory(prod, nodes_from_outputs(prod, outputs), tmp_path / "munge.key", outputs=outputs)
    hostvars = _read_back(inv, tmp_path)
    assert _enabled(hostvars["gpu-001"], "local_scratch") and _enabled(hostvars["gpu-016"], "local_scratch")
    assert all(_enabled(hostvars[h], "cluster_hosts") for h in ("head-001", "gpu-001", "gpu-016"))
    # prod has no storage.local_scratch: the role's own mount point and filesystem.
    assert "local_scratch_mount_point" not in hostvars["gpu-001"]


@pytest.mark.slow
def test_the_local_container_stack_leaves_them_off(tmp_path: Path) -> None:
    spec, _ = load_spec(stack_path("local"))
    inv = render_inventory(spec, _local_nodes(), tmp_path / "munge.key")
    assert not set(inv.group_vars) & set(AWS_ONLY)  # nothing rendered: the role defaults (off) hold
    hostvars = _read_back(inv, tmp_path)
    for host in ("head-001", "node-001"):
        assert not any(_enabled(hostvars[host], role) for role in AWS_ONLY), host


def test_a_static_spec_gets_local_scratch_only_when_it_asks(tmp_path: Path) -> None:
    from tests.providers.static_fakes import spec as static_spec

    nodes = [
        Node("head-001", "10.0.0.10", "head", "head", "local", {}),
        *(Node(f"gpu-00{i}", f"10.0.0.2{i}", "gpu", "gpu", "local", {}) for i in (1, 2)),
    ]
    plain = static_spec(tmp_path / "hosts.yml")
    assert not set(render_inventory(plain, nodes, tmp_path / "munge.key").group_vars) & set(AWS_ONLY)
    asked = plain.model_copy(
        update={"storage": Storage(local_scratch=LocalScratch(mount_point="/nvme", filesystem="ext4"))}
    )
    group_vars = render_inventory(asked, nodes, tmp_path / "munge.key").group_vars
    assert group_vars["local_scratch"] == {
        "local_scratch_enabled": True,
        "local_scratch_mount_point": "/nvme",
        "local_scratch_filesystem": "ext4",
        # enroot's images and containers (what pyxis runs) on the scratch disks, not the root volume
        "container_runtime_enroot_cache_path": "/nvme/enroot/cache/group-$(id -g)",
        "container_runtime_enroot_data_path": "/nvme/enroot/data/user-$(id -u)",
    }
    assert "cluster_hosts" not in group_vars  # an operator's machines keep the names they have


@pytest.mark.slow
def test_on_the_local_stack_the_roles_only_say_they_skip(tmp_path: Path) -> None:
    """The two roles, run for real on this machine with a local container node's variables (from the
    rendered local inventory), change nothing and say why."""
    spec, _ = load_spec(stack_path("local"))
    hostvars = _read_back(render_inventory(spec, _local_nodes(), tmp_path / "munge.key"), tmp_path)
    play = tmp_path / "play.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "The AWS-only roles on a local node",
                    "hosts": "node-001",
                    "gather_facts": False,
                    "vars": {
                        "ansible_connection": "local",
                        "ansible_python_interpreter": sys.executable,
                        "ansible_facts": NODE_FACTS[spec.software.os_image],
                    },
                    "roles": [{"role": role} for role in AWS_ONLY],
                }
            ]
        )
    )
    home = tmp_path / "ansible-home"
    result = ansible_runner.run(
        private_data_dir=str(tmp_path),
        playbook=str(play),
        inventory=str(tmp_path / "inventory" / "hosts.yml"),
        envvars={
            "ANSIBLE_HOME": str(home),
            "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
            "ANSIBLE_REMOTE_TMP": str(home / "remote-tmp"),
            "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
            "ANSIBLE_NOCOLOR": "1",
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        },
        quiet=True,
    )
    assert result.rc == 0, (tmp_path / "artifacts").as_posix()
    ran = [e["event_data"] for e in result.events if e.get("event") == "runner_on_ok"]
    assert not [e["task"] for e in ran if (e.get("res") or {}).get("changed")]
    said = [str((e.get("res") or {}).get("msg", "")) for e in ran]
    for role in AWS_ONLY:
        assert any(m.startswith(f"SKIPPED {role} on node-001: {role}_enabled is false") for m in said), said
    assert hostvars["node-001"]["clusterforge_container"] is True
    tasks = {e["task"] for e in ran}
    assert not tasks & {"Make the filesystem", "Name every cluster node in /etc/hosts"}
