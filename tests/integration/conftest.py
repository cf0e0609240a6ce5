"""The session's shared local stack (tests/integration/stack.py says why there is one)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.integration.stack import Stack, bring_up


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if shutil.which("podman") is None:
        pytest.skip("needs podman (scripts/setup.sh installs it)")
    yield from bring_up(tmp_path_factory)
