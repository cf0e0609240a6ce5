"""Every role under roles/ keeps the role conventions (docs/roles.md) that a machine can check.

- ``meta/argument_specs.yml`` declares exactly the variables of ``defaults/main.yml``, each with a
  type that fits its default, choices that contain it and ``elements`` for lists;
- every public variable is prefixed with the role's name and commented in ``defaults/main.yml``;
- ``meta/main.yml`` and ``tasks/preflight.yml`` exist, and the preflight asserts with a message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
ROLE_DIRS = (
    sorted(p for p in ROLES.iterdir() if (p / "tasks" / "main.yml").is_file()) if ROLES.is_dir() else []
)

# argument_specs type -> Python types a default of that type may have (a Jinja string fits any type).
_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "bool": (bool,),
    "int": (int,),
    "float": (float, int),
    "list": (list,),
    "dict": (dict,),
    "path": (str,),
    "raw": (object,),
}


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def _options(role: Path) -> dict[str, dict[str, Any]]:
    spec = _yaml(role / "meta" / "argument_specs.yml") or {}
    return ((spec.get("argument_specs") or {}).get("main") or {}).get("options") or {}


@pytest.fixture(params=ROLE_DIRS, ids=lambda p: p.name)
def role(request: pytest.FixtureRequest) -> Path:
    return request.param


def test_roles_found() -> None:
    assert ROLE_DIRS, f"no roles under {ROLES}"


def test_argument_specs_match_defaults(role: Path) -> None:
    defaults = _yaml(role / "defaults" / "main.yml") or {}
    options = _options(role)
    assert (role / "meta" / "argument_specs.yml").is_file(), (
        f"{role.name}: meta/argument_specs.yml is missing"
    )
    missing = sorted(set(defaults) - set(options))
    extra = sorted(k for k in set(options) - set(defaults) if not options[k].get("required"))
    assert not missing, f"{role.name}: defaults without an argument spec: {missing}"
    assert not extra, f"{role.name}: optional argument specs without a default: {extra}"


def test_argument_spec_types_fit_defaults(role: Path) -> None:
    defaults = _yaml(role / "defaults" / "main.yml") or {}
    problems = []
    for name, opt in _options(role).items():
        kind = opt.get("type", "str")
        if kind not in _TYPES:
            problems.append(f"{name}: unknown type {kind!r}")
            continue
        if kind == "list" and "elements" not in opt:
            problems.append(f"{name}: list without elements")
        if name not in defaults:
            continue
        value = defaults[name]
        templated = isinstance(value, str) and "{{" in value
        if (
            not templated
            and not isinstance(value, _TYPES[kind])
            or (kind == "int" and isinstance(value, bool))
        ):
            problems.append(f"{name}: default {value!r} is not a {kind}")
        if "choices" in opt and not templated and value not in opt["choices"]:
            problems.append(f"{name}: default {value!r} not in choices {opt['choices']}")
    assert not problems, f"{role.name}: " + "; ".join(problems)


def test_public_variables_are_prefixed_and_commented(role: Path) -> None:
    path = role / "defaults" / "main.yml"
    defaults = _yaml(path) or {}
    bad = [k for k in defaults if not k.startswith(f"{role.name}_")]
    assert not bad, f"{role.name}: public variables must start with '{role.name}_': {bad}"
    lines = path.read_text().splitlines()
    uncommented = []
    for i, line in enumerate(lines):
        key = line.split(":", 1)[0]
        if key not in defaults or line.startswith(" "):
            continue
        # A comment may cover a group of adjacent variables: look up past them to a comment line.
        j = i - 1
        while j >= 0 and lines[j].strip() and not lines[j].lstrip().startswith("#"):
            j -= 1
        if j < 0 or not lines[j].lstrip().startswith("#"):
            uncommented.append(key)
    assert not uncommented, f"{role.name}: defaults without a comment line above them: {uncommented}"


def test_meta_and_preflight(role: Path) -> None:
    assert (role / "meta" / "main.yml").is_file(), f"{role.name}: meta/main.yml is missing"
    preflight = role / "tasks" / "preflight.yml"
    assert preflight.is_file(), f"{role.name}: tasks/preflight.yml is missing"
    tasks = _yaml(preflight) or []
    asserts = [t for t in tasks if "ansible.builtin.assert" in t]
    assert asserts, f"{role.name}: tasks/preflight.yml has no ansible.builtin.assert"
    for t in asserts:
        assert t["ansible.builtin.assert"].get("fail_msg"), (
            f"{role.name}: assert {t.get('name')!r} has no fail_msg"
        )
