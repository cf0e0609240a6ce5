"""A rollout from a runner without the stack's munge key (a CI runner, a new workstation): the batch
gets the cluster's key from the stack's key store and certifies. The stand-in site.yml carries the
munge contract (tests/pipeline/playbooks/site.yml: the role makes a key when the control machine has
none; a node whose key is not the controller's fails to authenticate)."""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from clusterforge.rollout.upgrade import upgrade
from clusterforge.status import collect
from tests.rollout.conftest import COMPUTE, with_driver

pytestmark = pytest.mark.slow  # ansible-runner runs the stand-in playbooks (an `up`, then a rollout)

NEW = "535.309.01"


class MemoryStore:
    """Stands in for the stack's SSM parameter (clusterforge.cluster_secrets.SsmKeyStore)."""

    where = "the stack's key store"

    def __init__(self, value: bytes | None = None) -> None:
        self.value = value
        self.creates = 0

    def read(self) -> bytes | None:
        return self.value

    def create(self, value: bytes) -> bytes:
        self.creates += 1
        if self.value is None:
            self.value = value
        return self.value


def _key(world: dict) -> Path:
    return Path(os.environ["CLUSTERFORGE_STATE_DIR"]) / world["spec"].stack / "munge.key"


def _upgrade(world: dict, store: MemoryStore | None) -> tuple[int, str]:
    seams = dataclasses.replace(world["seams"], key_store=lambda spec: store)
    out = io.StringIO()
    outcome = upgrade(with_driver(world["spec"], NEW), console=Console(file=out, width=250), seams=seams)
    return outcome.code, out.getvalue()


def test_a_runner_without_local_state_gets_the_clusters_key_and_certifies(world: dict) -> None:
    key = _key(world)
    cluster_key = key.read_bytes()  # what the first up made and the controller runs
    store = MemoryStore(cluster_key)
    key.unlink()  # the runner has no .clusterforge/<stack>/munge.key
    code, text = _upgrade(world, store)
    assert code == 0, text
    assert key.read_bytes() == cluster_key and oct(key.stat().st_mode & 0o777) == "0o600"
    assert store.value == cluster_key and store.creates == 0
    rows = collect(world["spec"], world["provider"], world["slurm"].runner)
    assert {r.node: r.certification for r in rows if r.role == "gpu"} == dict.fromkeys(COMPUTE, "certified")


def test_without_a_store_the_same_runner_makes_a_second_key_and_the_batch_fails(world: dict) -> None:
    """What issue 23 found: the fresh runner's converge made a key the controller does not run."""
    _key(world).unlink()
    code, text = _upgrade(world, None)
    assert code != 0
    assert "this node's key is not the controller's" in " ".join(text.split())


def test_a_local_key_that_is_not_the_clusters_is_refused_before_any_converge(world: dict) -> None:
    key = _key(world)
    store = MemoryStore(key.read_bytes())
    key.write_bytes(b"a key made on another workstation")
    code, text = _upgrade(world, store)
    assert code == 2  # refused before any node was drained
    assert "nothing drained" in text and "is not the cluster's munge key" in " ".join(text.split())
    assert key.read_bytes() == b"a key made on another workstation"  # never overwritten silently
    assert not any(c[:2] == ["scontrol", "update"] for c in world["slurm"].calls)
