"""The packages the roles install at a pinned version and hold on a node, read from the roles themselves.

NODE.json's ``pins`` (validators/SCHEMA.md) must say exactly what configure applied, or
``software-versions`` checks something the node never had (or misses what it has). So nothing
here restates a package name or a version rule: the names and pin expressions are the roles'
own variables (``roles/<role>/defaults``, ``vars/main.yml``, ``vars/<OS>.yml``), evaluated with
the same inventory variables ``clusterforge.inventory`` renders for that node. The one thing
kept here is which variable each role installs and holds (``_RULES``), each quoting the task
that does it; ``tests/node/test_pins.py`` fails when a quoted expression leaves its
task file, so a role change cannot silently part from NODE.json.

Templating follows Ansible's classic mode: variables are templated lazily on use, and a result
that reads as a Python list literal becomes a list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2

from clusterforge.catalog.hardware import HardwareCatalog, InstanceType
from clusterforge.inventory import host_vars, monitoring_vars, software_vars
from clusterforge.node.role_vars import ROLES_DIR, RoleVarError, RoleVars, role_files
from clusterforge.providers.base import Node
from clusterforge.spec.models import ClusterSpec

# Kept under its old name: callers catch the error of a role variable that cannot be evaluated.
PinError = RoleVarError
__all__ = ["ROLES_DIR", "PackagePin", "PinError", "package_pins", "rules"]

# Node role (spec) -> the slurm role's slurm_node_role (playbooks/cluster.yml role params).
_SLURM_NODE_ROLE = {"head": "controller", "gpu": "compute", "login": "login"}


@dataclass(frozen=True)
class PackagePin:
    """One package configure installs and holds. ``version``: the apt version the role asks for,
    a glob where the role passes one (``535.261.03-*``); empty: any version (held only)."""

    package: str
    version: str
    held: bool
    role: str

    def as_node_json(self) -> dict[str, Any]:
        return {"package": self.package, "version": self.version, "held": self.held}


@dataclass(frozen=True)
class _Rule:
    """A role's install-and-hold step: on which node roles (``hosts``), when, which packages at
    which version. ``task``: the file holding the step; ``quoted`` are expressions copied from it."""

    role: str
    hosts: tuple[str, ...]
    when: str
    packages: str
    version: str | None  # None: installed at the source's own version, held
    task: str
    quoted: tuple[str, ...]


_GPU = ("gpu",)
_ALL = ("head", "gpu", "login")
_RULES: tuple[_Rule, ...] = (
    _Rule(
        "nvidia_driver",
        _GPU,
        "nvidia_driver_enabled",
        "_nvidia_driver_locked",
        "_nvidia_driver_pin",
        "tasks/setup-Debian.yml",
        (
            "regex_replace', '$', '=' ~ _nvidia_driver_pin)",
            # + _nvidia_driver_pinning: the version-locking package, installed only where NVIDIA's
            # repository offers it (decided on the node), so it is not a NODE.json pin.
            "(_nvidia_driver_locked + _nvidia_driver_unpinned + _nvidia_driver_pinning)",
        ),
    ),
    _Rule(
        "nvidia_driver",
        _GPU,
        "nvidia_driver_enabled",
        "_nvidia_driver_unpinned",
        None,
        "tasks/setup-Debian.yml",
        ("+ _nvidia_driver_unpinned }}",),
    ),
    _Rule(
        "cuda_toolkit",
        _GPU,
        "cuda_toolkit_enabled",
        "[_cuda_toolkit_package]",
        "_cuda_toolkit_pin",
        "tasks/setup-Debian.yml",
        ('"{{ _cuda_toolkit_package }}={{ _cuda_toolkit_pin }}"', "([_cuda_toolkit_package])"),
    ),
    _Rule(
        "nccl",
        _GPU,
        "nccl_enabled and nccl_version | length > 0",
        "_nccl_packages",
        "_nccl_pin",
        "tasks/setup-Debian.yml",
        ("_nccl_packages | map('regex_replace', '$', '=' ~ _nccl_pin)", "(_nccl_packages)"),
    ),
    _Rule(
        "fabric_manager",
        _GPU,
        "fabric_manager_enabled",
        "_fabric_manager_pinned",  # Fabric Manager and its NSCQ companion (from 580: unbranched names)
        "_fabric_manager_pin",
        "tasks/setup-Debian.yml",
        (
            "_fabric_manager_pinned | map('regex_replace', '$', '=' ~ _fabric_manager_pin)",
            "(_fabric_manager_pinned",
        ),
    ),
    _Rule(
        "dcgm",
        _GPU,
        "dcgm_enabled and dcgm_version | length > 0",
        "_dcgm_packages",
        "_dcgm_pin",
        "tasks/setup-Debian.yml",
        ("_dcgm_packages | map('regex_replace', '$', '=' ~ _dcgm_pin)", "(_dcgm_packages)"),
    ),
    _Rule(
        "container_runtime",
        _GPU,
        "container_runtime_enabled and container_runtime_toolkit_version | length > 0",
        "_container_runtime_toolkit_packages",
        "_container_runtime_toolkit_pin",
        "tasks/setup-Debian.yml",
        ("| map('regex_replace', '$', '=' ~ _container_runtime_toolkit_pin)",),
    ),
    # enroot comes as NVIDIA's .deb files named <package>_<version>-1_<arch>.deb (vars/main.yml).
    _Rule(
        "container_runtime",
        _GPU,
        "container_runtime_enabled and container_runtime_toolkit_version | length > 0",
        "_container_runtime_enroot_packages",
        "container_runtime_enroot_version ~ '-1'",
        "vars/main.yml",
        ("~ container_runtime_enroot_version ~ '-1_'",),
    ),
    _Rule(
        "monitoring",
        _ALL,
        "monitoring_node_exporter_enabled and monitoring_node_exporter_version | length > 0",
        "[_monitoring_node_exporter_package]",
        "monitoring_node_exporter_version",
        "tasks/node_exporter.yml",
        ("('=' ~ monitoring_node_exporter_version if monitoring_node_exporter_version else '')",),
    ),
    _Rule(
        "monitoring",
        _ALL,
        "monitoring_dcgm_exporter_enabled and monitoring_gpu_count | int > 0",
        "[monitoring_dcgm_exporter_package]",
        "monitoring_dcgm_exporter_version if '-' in monitoring_dcgm_exporter_version"
        " else monitoring_dcgm_exporter_version ~ '-*'",
        "tasks/dcgm_exporter.yml",
        ("if '-' in monitoring_dcgm_exporter_version else monitoring_dcgm_exporter_version ~ '-*' }}",),
    ),
    _Rule(
        "slurm",
        _ALL,
        "true",
        "_slurm_installed_packages",
        "slurm_version ~ '-*'",
        "tasks/install.yml",
        (
            "'=' ~ slurm_version ~ '-*'",
            # The hold: every installed package not yet held, in one apt-mark.
            "{{ _slurm_installed_packages | difference(__slurm_held.stdout_lines) }}",
        ),
    ),
)
# Which playbook runs each role on which node roles (playbooks/node_software.yml: gpu_nodes;
# cluster.yml: monitoring on all, slurm on every Slurm host) is what ``hosts`` states above.


def rules() -> tuple[_Rule, ...]:
    return _RULES


def _node_variables(spec: ClusterSpec, node: Node, it: InstanceType, hw: HardwareCatalog) -> dict[str, Any]:
    """What the inventory gives this node (inventory.render_inventory's group_vars that name
    versions, then its host_vars); role defaults and vars are laid under and over it per role."""
    out: dict[str, Any] = {}
    out.update(software_vars(spec, containers=it.container))  # as inventory.render_inventory decides
    out["slurm_version"] = spec.software.slurm  # inventory.slurm_vars
    out.update(monitoring_vars(spec))
    out.update(host_vars(node, hw))
    out["slurm_node_role"] = _SLURM_NODE_ROLE.get(node.role, "compute")
    return out


def package_pins(spec: ClusterSpec, node: Node, it: InstanceType, hw: HardwareCatalog) -> list[PackagePin]:
    """Every package configure installs at a pinned version and holds on ``node``, in role order."""
    inventory = _node_variables(spec, node, it, hw)
    pins: dict[str, PackagePin] = {}
    for rule in _RULES:
        if node.role not in rule.hosts:
            continue
        defaults, role_vars = role_files(rule.role, spec.software.os_image)
        # Ansible's precedence: role defaults < inventory < role vars / include_vars.
        lazy = RoleVars({**defaults, **inventory, **role_vars}, rule.role)
        try:
            if str(lazy.expression(rule.when)) != "True":
                continue
            packages = lazy.expression(rule.packages)
            version = "" if rule.version is None else str(lazy.expression(rule.version))
        except (jinja2.TemplateError, PinError) as exc:
            raise PinError(
                f"roles/{rule.role}: cannot evaluate {rule.packages} for {node.name}: {exc}"
            ) from None
        if isinstance(packages, str):
            packages = [packages]
        for name in packages:
            pins.setdefault(str(name), PackagePin(str(name), version, True, rule.role))
    return list(pins.values())
