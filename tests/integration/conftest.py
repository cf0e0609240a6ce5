"""The session's shared local stack (tests/integration/stack.py says why there is one)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.integration.stack import Stack, bring_up


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first integration test also pays for the shared stack's `up` (minutes on 2 cores):
    every integration test gets an hour, so a slow machine fails on asserts, not on the clock.

    Tests marked `fresh_stack` read the stack as its first `up` left it, so they run before every
    other test of the shared stack (test files run in name order, and a fault test before them left
    its node drained: CI of 2026-12-05 failed the second-`up` test on that)."""
    for item in items:
        if "tests/integration/" in str(item.fspath) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(3600))
        # Judged against the shared stack's fleet and baseline: `invoke test` runs these alone.
        if "local_stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.shared_stack)
    items.sort(key=lambda item: item.get_closest_marker("fresh_stack") is None)  # stable: else in order


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if shutil.which("podman") is None:
        pytest.skip("needs podman (scripts/setup.sh installs it)")
    yield from bring_up(tmp_path_factory)
