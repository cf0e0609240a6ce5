"""Role variables as Ansible evaluates them, read on the workstation from the roles themselves.

One public place for what NODE.json's pins (clusterforge.node.pins) and the drift declarations
(clusterforge.drift.manages) both need: a role's defaults and vars files, laid with the node's
inventory variables, templated lazily on first use as Ansible's classic mode does (a variable
may use another; a result that reads as a Python list literal becomes a list).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"

# Spec os_image -> the per-OS vars files the roles' first_found looks for, most specific first:
# "<distribution>-<version>" (GPU roles), "<distribution>-<major>", "<distribution>", "<os_family>"
# (slurm, monitoring); Ubuntu's os_family is Debian.
OS_VARS = {
    "debian-12": ("Debian-12.yml", "Debian.yml"),
    "ubuntu-22.04": ("Ubuntu-22.04.yml", "Ubuntu-22.yml", "Ubuntu.yml", "Debian.yml"),
    "ubuntu-24.04": ("Ubuntu-24.04.yml", "Ubuntu-24.yml", "Ubuntu.yml", "Debian.yml"),
}


class RoleVarError(Exception):
    """A role variable could not be evaluated; the message names the role and the variable."""


# One environment for every node: a template is compiled once per expression, not once per node
# (at thousands of nodes compiling the same role expressions again dominated the configure prep).
_ENV = jinja2.Environment(undefined=jinja2.StrictUndefined)


@cache
def _compiled(source: str) -> jinja2.Template:
    return _ENV.from_string(source)


@cache
def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def role_files(role: str, os_image: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(defaults, vars): defaults/main.yml; vars/main.yml with the first per-OS vars file found."""
    base = ROLES_DIR / role
    merged = dict(_read_yaml(base / "vars" / "main.yml"))
    for name in OS_VARS.get(os_image, ()):
        found = _read_yaml(base / "vars" / name)
        if found:
            merged.update(found)
            break
    return _read_yaml(base / "defaults" / "main.yml"), merged


class RoleVars(Mapping[str, Any]):
    """Variables templated on first use, as Ansible does (a role var may use another)."""

    def __init__(self, raw: Mapping[str, Any], role: str) -> None:
        self._raw, self._role = raw, role
        self._done: dict[str, Any] = {}
        self._busy: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        if key in self._done:
            return self._done[key]
        if key not in self._raw:
            raise KeyError(key)
        if key in self._busy:
            raise RoleVarError(f"roles/{self._role}: variable {key} refers to itself")
        self._busy.add(key)
        try:
            value = self.template(self._raw[key])
        finally:
            self._busy.discard(key)
        self._done[key] = value
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def template(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.template(v) for v in value]
        if isinstance(value, dict):
            return {k: self.template(v) for k, v in value.items()}
        if not isinstance(value, str) or "{" not in value:
            return value
        tmpl = _compiled(value.strip())
        text = "".join(tmpl.root_render_func(tmpl.new_context(self, shared=True)))  # type: ignore[arg-type]  # jinja2 reads any Mapping here; its annotation says dict
        if text.startswith("[") and text.endswith("]"):
            try:
                return ast.literal_eval(text)
            except (ValueError, SyntaxError):
                return text
        return text

    def expression(self, expr: str) -> Any:
        return self.template("{{ " + expr + " }}")
