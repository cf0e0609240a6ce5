"""Every role folder has a README.md that names each variable of its defaults/main.yml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
ROLE_DIRS = sorted(p for p in ROLES.iterdir() if p.is_dir()) if ROLES.is_dir() else []


def unnamed_variables(readme: str, defaults: dict[str, object]) -> list[str]:
    """Variables of the defaults the README does not name in backticks (`var` or `var` with a value)."""
    named = set(re.findall(r"`([a-z][a-z0-9_]*)`", readme))
    return sorted(name for name in defaults if name not in named)


def test_every_role_folder_is_checked() -> None:
    assert len(ROLE_DIRS) >= 17, [p.name for p in ROLE_DIRS]


@pytest.mark.parametrize("role", ROLE_DIRS, ids=lambda p: p.name)
def test_role_has_a_readme_naming_its_variables(role: Path) -> None:
    readme = role / "README.md"
    assert readme.is_file(), f"{role.name}: no README.md (what it does, its variables, its playbook)"
    text = readme.read_text(encoding="utf-8")
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text(encoding="utf-8")) or {}
    missing = unnamed_variables(text, defaults)
    assert not missing, (
        f"roles/{role.name}/README.md does not name these variables of defaults/main.yml: {missing}"
    )


def test_a_variable_named_only_in_prose_does_not_count() -> None:
    text = "- `slurm_version` (`22.05.8`): upstream version; slurm_hold_reason is the drain reason"
    assert unnamed_variables(text, {"slurm_version": "", "slurm_hold_reason": ""}) == ["slurm_hold_reason"]
