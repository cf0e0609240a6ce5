"""What each role manages on a node, from ``roles/<role>/meta/manages.yml``, rendered per node.

Convention (docs/INTERFACES.md, "Drift"): every role has ``meta/manages.yml``::

    manages:
      - when: "slurm_node_role == 'compute'"      # optional, an Ansible-style condition
        packages: ["{{ _slurm_installed_packages }}"]
        files: ["{{ _slurm_config_dir }}/slurm.conf"]
        units: ["{{ _slurm_compute_service }}"]

Each entry is templated with the role's own variables (defaults, vars, the per-OS vars file)
and the node's inventory variables, the way ``clusterforge.node.pins`` evaluates the
roles' pins; a list result is flattened, an empty one dropped. Declarations name only what a
role puts in place and keeps (installed and held packages, rendered or copied files, enabled or
started units), never facts: they are evaluated on the workstation, before any Ansible runs.
Ansible reads nothing in meta/ but main.yml and argument_specs.yml, so the file is inert to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from clusterforge.node.role_vars import ROLES_DIR, RoleVarError, RoleVars, role_files

KINDS = ("packages", "files", "units")
MANAGES_FILE = "meta/manages.yml"


class ManagesError(Exception):
    """A declaration is missing or cannot be evaluated; the message names the file and entry."""


@dataclass(frozen=True)
class Managed:
    """What the roles applied to one node manage there (sorted, no duplicates)."""

    packages: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    roles: tuple[str, ...] = field(default=())

    def as_probe_input(self) -> dict[str, list[str]]:
        return {"packages": list(self.packages), "files": list(self.files), "units": list(self.units)}

    def item_names(self) -> list[str]:
        """The digest keys these give (``"<kind> <name>"``, as clusterforge/drift/probe.py writes)."""
        return [f"{kind[:-1]} {name}" for kind in KINDS for name in getattr(self, kind)]


@cache
def read_manages(role: str, roles_dir: Path = ROLES_DIR) -> tuple[dict[str, Any], ...]:
    """The declaration groups of one role, checked for shape."""
    path = roles_dir / role / MANAGES_FILE
    if not path.is_file():
        raise ManagesError(
            f"{path}: missing; every role declares what it manages (docs/INTERFACES.md, Drift)"
        )
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    groups = data.get("manages") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        raise ManagesError(f"{path}: top-level key 'manages' must be a list of groups")
    for i, group in enumerate(groups):
        if not isinstance(group, dict):
            raise ManagesError(f"{path}: manages[{i}] must be a mapping")
        unknown = sorted(set(group) - {"when", *KINDS})
        if unknown:
            raise ManagesError(
                f"{path}: manages[{i}]: unknown key(s) {', '.join(unknown)} (known: when, {', '.join(KINDS)})"
            )
        for kind in KINDS:
            if not isinstance(group.get(kind, []), list):
                raise ManagesError(f"{path}: manages[{i}].{kind} must be a list")
    return tuple(groups)


def _flatten(value: Any) -> Iterable[str]:
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _flatten(v)
    elif value not in (None, ""):
        yield str(value).strip()


def managed_for(
    roles: Mapping[str, list[dict[str, Any]]],
    variables: Mapping[str, Any],
    os_image: str,
    roles_dir: Path = ROLES_DIR,
) -> Managed:
    """What ``roles`` (role -> play vars of each play applying it, inputs.roles_for) manage on a
    node whose inventory variables are ``variables``."""
    found: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for role, plays in roles.items():
        groups = read_manages(role, roles_dir)
        defaults, role_vars = role_files(role, os_image)
        for play_vars in plays or [{}]:
            # Ansible's precedence: role defaults < inventory < play's role vars < role vars.
            lazy = RoleVars({**defaults, **variables, **play_vars, **role_vars}, role)
            for i, group in enumerate(groups):
                where = f"roles/{role}/{MANAGES_FILE}: manages[{i}]"
                try:
                    if "when" in group and str(lazy.expression(str(group["when"]))) != "True":
                        continue
                    for kind in KINDS:
                        for entry in group.get(kind, []):
                            found[kind].update(_flatten(lazy.template(entry)))
                except (jinja2.TemplateError, RoleVarError) as exc:
                    raise ManagesError(f"{where}: cannot evaluate: {exc}") from None
    packages, files, units = (tuple(sorted(found[k])) for k in KINDS)
    return Managed(packages, files, units, roles=tuple(roles))
