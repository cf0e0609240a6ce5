"""Completeness: every registered check is listed, documented and tested; ids are stable kebab-case."""

from __future__ import annotations

import re

from conftest import ROOT

from validators.profiles import PROFILES
from validators.registry import CHECKS, all_checks, for_profile

CHECKS_MD = (ROOT / "validators" / "CHECKS.md").read_text()
TESTS = "\n".join(
    p.read_text() for p in (ROOT / "tests" / "validators").glob("test_*.py") if p.name != "test_registry.py"
)
KNOWN_NEEDS = {"gpu", "torch", "dcgm", "nccl-tests", "peers", "efa", "gpu-burn", "infiniband"}


def test_ids_are_unique_kebab_case_and_complete() -> None:
    ids = [c.id for c in all_checks()]
    assert len(ids) == len(set(ids)) == len(CHECKS)
    for check in all_checks():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", check.id), check.id
        assert check.group in ("preflight", "nccl", "burnin", "checkpoint"), check.id
        assert check.profiles and set(check.profiles) <= set(PROFILES), check.id
        assert set(check.needs) <= KNOWN_NEEDS, check.id
        assert len(check.measures) > 30, check.id


def test_every_check_is_documented_in_checks_md() -> None:
    documented = re.findall(r"^### ([a-z0-9-]+)$", CHECKS_MD, flags=re.MULTILINE)
    assert documented == [c.id for c in all_checks()]  # same checks, same (run) order


def test_every_check_has_a_test() -> None:
    for check in all_checks():
        cls = type(check).__name__
        assert f'"{check.id}"' in TESTS or re.search(rf"\b{cls}\(\)", TESTS), f"no test exercises {check.id}"


def test_profiles_nest() -> None:
    quick, standard, full = ({c.id for c in for_profile(p)} for p in PROFILES)
    assert quick <= full and standard <= full
    assert {"dcgm-diag", "nccl-multi-node"} <= standard - quick
