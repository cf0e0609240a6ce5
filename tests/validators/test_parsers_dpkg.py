"""dpkg-query status parsing and the pin judge, on real captures (tests/data/dpkg-query/SOURCES.md)."""

from __future__ import annotations

import pytest
from conftest import captured

from validators.config import Pin
from validators.parsers.dpkg import PackageState, parse_dpkg_status, pin_problems

HELLO = Pin("hello", "2.10-*", True)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("installed", PackageState("install", "installed", "2.10-3")),
        ("held", PackageState("hold", "installed", "2.10-3")),
        ("unheld", PackageState("install", "installed", "2.10-3")),
        ("not-installed-held", PackageState("hold", "not-installed", "")),
        ("missing", PackageState("install", "installed", "2.10-3")),
    ],
)
def test_states_of_hello(case: str, expected: PackageState) -> None:
    states = parse_dpkg_status(captured("dpkg-query", f"{case}.txt"))
    assert states["hello"] == expected
    assert states["dpkg"] == PackageState("install", "installed", "1.21.22")


def test_unknown_package_is_absent_and_removed_keeps_config_files() -> None:
    assert "nvidia-smi" not in parse_dpkg_status(captured("dpkg-query", "missing.txt"))
    assert "hello" not in parse_dpkg_status(captured("dpkg-query", "removed.txt"))
    nano = parse_dpkg_status(captured("dpkg-query", "removed-config-files.txt"))["nano"]
    assert nano == PackageState("deinstall", "config-files", "7.2-1+deb12u1")


@pytest.mark.parametrize(
    ("case", "pin", "problems"),
    [
        ("held", HELLO, []),
        ("held", Pin("hello", "", True), []),
        ("installed", HELLO, ["hello: not held"]),
        ("unheld", HELLO, ["hello: not held"]),
        ("unheld", Pin("hello", "2.10-*", False), []),
        ("held", Pin("hello", "2.11-*", True), ["hello: 2.10-3 installed (2.11-* pinned)"]),
        ("unheld", Pin("hello", "2.1-*", True), ["hello: 2.10-3 installed (2.1-* pinned), not held"]),
        ("removed", HELLO, ["hello: not installed (2.10-* pinned)"]),
        ("not-installed-held", HELLO, ["hello: not installed (2.10-* pinned)"]),
        (
            "missing",
            Pin("nvidia-smi", "535.261.03-*", True),
            ["nvidia-smi: not installed (535.261.03-* pinned)"],
        ),
        (
            "removed-config-files",
            Pin("nano", "7.2-*", True),
            ["nano: removed (config files left) (7.2-* pinned)"],
        ),
    ],
)
def test_pin_problems(case: str, pin: Pin, problems: list) -> None:
    assert pin_problems([pin], parse_dpkg_status(captured("dpkg-query", f"{case}.txt"))) == problems
