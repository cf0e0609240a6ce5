"""Read a hand-written Ansible inventory (YAML) into the hosts a static stack is made of.

Only what clusterforge needs is read: each host's group (``slurm_controller``, ``gpu_nodes``,
``login_nodes``), its address and connection variables, and which spec pool and hardware it is.
Variables merge as Ansible merges them for these simple cases: ``all.vars``, then
``group_vars/all``, then the host's group (``vars`` and ``group_vars/<group>``), then the host.
Errors name the file, the host and the key, and say what to write instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clusterforge import strict_yaml
from clusterforge.providers.base import ProviderError

# The groups the playbooks know (inventories/static-example/hosts.yml), and the role each one is.
GROUP_ROLES = {"slurm_controller": "head", "gpu_nodes": "gpu", "login_nodes": "login"}


@dataclass(frozen=True)
class InventoryHost:
    name: str
    role: str  # "head" | "gpu" | "login"
    variables: dict[str, Any]  # merged: all < group < host

    @property
    def address(self) -> str:
        return str(
            self.variables.get("clusterforge_address") or self.variables.get("ansible_host") or self.name
        )


def _load_yaml(path: Path) -> Any:
    try:
        return strict_yaml.load_file(path)
    except OSError as exc:
        raise ProviderError(
            f"{path}: cannot read the static inventory ({exc.strerror}); fix provider.inventory"
        ) from exc
    except strict_yaml.DuplicateKeyError as exc:
        raise ProviderError(str(exc)) from None
    except yaml.YAMLError as exc:
        raise ProviderError(
            f"{path}: not YAML ({str(exc).splitlines()[0]}); the static provider reads YAML inventories "
            "(convert an INI one with `ansible-inventory -i FILE --list -y`)"
        ) from exc


def _group_vars(folder: Path, group: str) -> dict[str, Any]:
    """``group_vars/<group>.yml`` or every YAML file in ``group_vars/<group>/``, as Ansible reads them."""
    out: dict[str, Any] = {}
    base = folder / "group_vars"
    files = sorted((base / group).glob("*.y*ml")) if (base / group).is_dir() else []
    files += [p for p in (base / f"{group}.yml", base / f"{group}.yaml") if p.is_file()]
    for path in files:
        data = _load_yaml(path)
        if isinstance(data, Mapping):
            out.update(data)
    return out


def _as_mapping(value: Any, path: Path, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProviderError(f"{path}: {where}: expected a mapping, found {type(value).__name__}")
    return value


def _walk(
    group: str, body: Mapping[str, Any], inherited: dict[str, Any], path: Path, out: dict[str, list]
) -> None:
    """Collect (group, host, merged vars) for every host under ``group``, recursively."""
    here = {
        **inherited,
        **_group_vars(path.parent, group),
        **_as_mapping(body.get("vars"), path, f"{group}.vars"),
    }
    for host, host_vars in _as_mapping(body.get("hosts"), path, f"{group}.hosts").items():
        merged = {**here, **_as_mapping(host_vars, path, f"{group}.hosts.{host}")}
        out.setdefault(str(host), []).append((group, merged))
    for child, child_body in _as_mapping(body.get("children"), path, f"{group}.children").items():
        _walk(str(child), _as_mapping(child_body, path, f"{group}.children.{child}"), here, path, out)


def read_inventory(path: Path) -> list[InventoryHost]:
    """The inventory's hosts in file order; a host in none or several of the role groups is an error."""
    data = _as_mapping(_load_yaml(path), path, "top level")
    if "all" not in data:
        raise ProviderError(f"{path}: no 'all:' group; start from inventories/static-example/hosts.yml")
    found: dict[str, list] = {}
    _walk("all", _as_mapping(data["all"], path, "all"), {}, path, found)
    hosts = []
    for name, entries in found.items():
        roles = sorted({GROUP_ROLES[g] for g, _ in entries if g in GROUP_ROLES})
        groups = ", ".join(GROUP_ROLES)
        if not roles:
            raise ProviderError(f"{path}: host {name}: in none of the groups {groups}; put it in one")
        if len(roles) > 1:
            raise ProviderError(
                f"{path}: host {name}: in several role groups ({', '.join(roles)}); keep it in one"
            )
        merged: dict[str, Any] = {}
        for _, variables in entries:
            merged.update(variables)
        hosts.append(InventoryHost(name, roles[0], merged))
    return hosts
