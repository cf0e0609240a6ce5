"""cluster_hosts's /etc/hosts block, templated by Ansible itself from an inventory shaped as the
AWS provider renders it (clusterforge_address per host; ansible_host is an instance id with SSM)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.roles.test_local_scratch import _trusted

ROLE = Path(__file__).resolve().parents[2] / "roles" / "cluster_hosts"


def _block(hostvars: dict[str, dict[str, Any]], **overrides: Any) -> str:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    role_vars = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
    }
    variables = {
        **{k: _trusted(v) for k, v in role_vars.items()},
        "groups": {"all": list(hostvars)},
        "hostvars": hostvars,
        **overrides,
    }
    return Templar(loader=DataLoader(), variables=variables).template(_trusted("{{ _cluster_hosts_block }}"))


INVENTORY = {
    "gpu-002": {"clusterforge_address": "10.0.0.6", "ansible_host": "i-0b"},
    "head-001": {"clusterforge_address": "10.0.32.4", "ansible_host": "i-0h"},
    "gpu-001": {"clusterforge_address": "10.0.0.5", "ansible_host": "i-0a"},
    "localhost": {},  # no address: not a cluster node
}


def test_every_node_by_name_sorted_and_nothing_else():
    assert _block(INVENTORY).splitlines() == ["10.0.0.5 gpu-001", "10.0.0.6 gpu-002", "10.0.32.4 head-001"]


def test_listed_entries_win():
    entries = [{"name": "login-001", "address": "10.0.32.9"}]
    assert _block(INVENTORY, cluster_hosts_entries=entries).splitlines() == ["10.0.32.9 login-001"]
