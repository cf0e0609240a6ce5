"""Converge the cluster roles (playbooks/cluster.yml) on container nodes through ansible-runner.

The inventory is written here from the role variables documented in docs/INTERFACES.md
("Role variables (cluster roles)"), not through the pipeline's renderer, so these tests pin the
roles' own API.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from clusterforge.ansible.runner import CONNECTION_PLUGINS
from clusterforge.providers.base import Node
from clusterforge.providers.local.config import COLLECTIONS_PATH, write_podman_config

REPO = Path(__file__).resolve().parents[2]
CLUSTER_PLAYBOOK = REPO / "playbooks" / "cluster.yml"
# cluster.yml then the validators runtime (node software since issue 24: node_software.yml).
CLUSTER_VALIDATORS_PLAYBOOK = REPO / "tests" / "roles" / "playbooks" / "cluster_validators.yml"
CERTIFY_PLAYBOOK = REPO / "playbooks" / "certify.yml"
REMOTE_TMP = "/var/tmp/.ansible-tmp"  # not /tmp: a tmpfs the podman connection cannot copy into
TORCH_ON_NODE = "/opt/clusterforge/torch"


@dataclass
class PlayOutcome:
    rc: int
    status: str
    stats: dict[str, dict[str, int]]
    changed_tasks: dict[str, list[str]] = field(default_factory=dict)  # host -> task names
    failures: dict[str, list[str]] = field(default_factory=dict)
    event_text: str = ""  # every event's stdout, as ansible-runner handed it over
    artifacts: Path = Path()

    def explain(self) -> str:
        return f"status={self.status} rc={self.rc} failures={self.failures} changed={self.changed_tasks}"


def cluster_vars(nodes: list[Node], munge_key: Path, torch: str) -> dict[str, Any]:
    """group_vars/all for a local stack: head + CPU compute containers, shared volume at /shared."""
    head = next(n for n in nodes if n.role == "head")
    compute = sorted((n for n in nodes if n.role == "gpu"), key=lambda n: n.name)
    names = [n.name for n in compute]
    return {
        "slurm_cluster_name": "cfrtest",
        "slurm_controller_name": head.name,
        "slurm_controller_address": head.address,
        "slurm_munge_key_file": str(munge_key),
        # CPU-only containers: no GRES; small sizes so slurmd's real hardware is never below them.
        "slurm_nodes": [
            {"name": n.name, "address": n.address, "cpus": 1, "real_memory_mb": 500} for n in compute
        ],
        "slurm_partitions": [{"name": "batch", "nodes": names, "default": True, "max_time": "INFINITE"}],
        "slurm_topology_switches": [{"name": "local", "nodes": names}],
        # Containers: no writable cgroup hierarchy (ENVIRONMENT.md, Slurm 22.05).
        "slurm_proctrack_type": "proctrack/linuxproc",
        "slurm_task_plugin": "task/none",
        "slurm_cgroup_plugin": "cgroup/v1",
        "slurm_cgroup_constrain": False,
        "slurm_select_type_parameters": "CR_Core",
        "slurm_slurmd_parameters": "config_overrides",
        "shared_storage_kind": "volume",
        "shared_storage_mount_point": "/shared",
        "monitoring_gpu_count": 0,
        "validators_runtime_torch": torch,
        "validators_runtime_torch_path": TORCH_ON_NODE,
    }


def write_inventory(folder: Path, nodes: list[Node], variables: dict[str, Any]) -> Path:
    groups: dict[str, dict[str, Any]] = {"slurm_controller": {"hosts": {}}, "gpu_nodes": {"hosts": {}}}
    for node in nodes:
        host = {**node.connection, "ansible_remote_tmp": REMOTE_TMP}
        groups["slurm_controller" if node.role == "head" else "gpu_nodes"]["hosts"][node.name] = host
    folder.mkdir(parents=True, exist_ok=True)
    hosts = folder / "hosts.yml"
    hosts.write_text(yaml.safe_dump({"all": {"children": groups, "vars": variables}}, sort_keys=False))
    return hosts


def run_play(
    work: Path,
    playbook: Path,
    inventory: Path,
    *,
    extravars: dict[str, Any] | None = None,
    limit: str | None = None,
    check: bool = False,
) -> PlayOutcome:
    import ansible_runner

    work.mkdir(parents=True, exist_ok=True)
    home = work / "ansible-home"
    envvars = {
        **write_podman_config(),
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_REMOTE_TMP": REMOTE_TMP,
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_CONNECTION_PLUGINS": str(CONNECTION_PLUGINS),
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }
    result = ansible_runner.run(
        private_data_dir=str(work),
        playbook=str(playbook),
        inventory=str(inventory),
        envvars=envvars,
        extravars=extravars or {},
        limit=limit,
        cmdline="--check --diff" if check else None,
        quiet=True,
    )
    outcome = PlayOutcome(rc=int(result.rc), status=str(result.status), stats=dict(result.stats or {}))
    texts = []
    for event in result.events:
        texts.append(event.get("stdout") or "")
        data = event.get("event_data") or {}
        host, res = data.get("host"), data.get("res") or {}
        if event.get("event") == "runner_on_ok" and res.get("changed"):
            outcome.changed_tasks.setdefault(host, []).append(data.get("task", ""))
        elif event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not data.get(
            "ignore_errors"
        ):
            outcome.failures.setdefault(host, []).append(f"{data.get('task')}: {res.get('msg', res)}")
    outcome.event_text = "\n".join(texts)
    outcome.artifacts = work / "artifacts" / result.config.ident
    return outcome
