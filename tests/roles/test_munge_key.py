"""The slurm role keeps one munge key per cluster, on real container nodes (Debian 12, systemd, the
distribution's munge): a runner without the key file (a CI runner, a lost workstation) converging a
batch gets the controller's key, and a key file that is not the controller's is refused. Proof is
munge itself: a credential made on the controller decodes on the compute node (mungekey(8): "All
munged daemons within a security realm must use the same key").

Before issue 23 the second converge made a new key and installed it on node-001, whose unmunge then
failed with "Invalid credential"."""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusterforge.providers.local.config import COLLECTIONS_PATH, write_podman_config
from tests.roles.gpu_play import PlayOutcome, run_play, write_inventory

# Opt-in (`long`) to keep CI under an hour: passed in the CI rehearsal of 2026-12-02 (66 s); the key's
# flow through a rollout runs in the slow tier (tests/rollout/test_munge_key_store.py).
pytestmark = [pytest.mark.integration, pytest.mark.long]

PLAYBOOK = Path(__file__).resolve().parent / "playbooks" / "munge_key.yml"
HEAD, NODE = "head-001", "node-001"


@dataclass
class Cluster:
    stack: Any
    inventory: Path
    env: dict[str, str]
    work: Path
    key: Path

    def play(self, name: str, limit: str | None = None) -> PlayOutcome:
        return run_play(self.work / name, self.inventory, self.env, limit=limit, playbook=PLAYBOOK)

    def node_key(self, node: str) -> str:
        return self.stack.exec(node, "sha256sum", "/etc/munge/munge.key").split()[0]

    def credential_crosses(self) -> bool:
        """munge -n on the controller, unmunge on the compute node."""
        cred = self.stack.exec(HEAD, "munge", "-n").strip()
        engine = self.stack.engine()
        proc = subprocess.run(
            engine.argv("exec", "-i", f"{self.stack.spec.stack}-{NODE}", "unmunge"),
            input=cred, capture_output=True, text=True, env=engine.environ(), timeout=60, check=False,
        )  # fmt: skip
        return proc.returncode == 0


@pytest.fixture(scope="module")
def cluster(
    container_stack: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    stack = container_stack(1, head=True)
    work = tmp_path_factory.mktemp("munge")
    key = work / "state" / "munge.key"
    inventory = write_inventory(
        work / "hosts.yml",
        {
            "slurm_controller": {"hosts": {HEAD: stack.node(HEAD).connection}, "vars": {"slurm_munge_key_file": str(key)}},
            "gpu_nodes": {"hosts": {NODE: stack.node(NODE).connection}, "vars": {"slurm_munge_key_file": str(key)}},
        },
    )  # fmt: skip
    env = {**write_podman_config(), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH)}
    yield Cluster(stack, inventory, env, work, key)


def test_a_runner_without_the_key_file_gets_the_clusters_and_a_foreign_one_is_refused(
    cluster: Cluster,
) -> None:
    first = cluster.play("first")
    assert first.rc == 0, first.explain()
    original = hashlib.sha256(cluster.key.read_bytes()).hexdigest()
    assert cluster.node_key(HEAD) == cluster.node_key(NODE) == original
    assert cluster.credential_crosses()

    # A fresh runner: no key file. Converging the compute node alone reads the controller's key back.
    cluster.key.unlink()
    batch = cluster.play("no-local-key", limit=NODE)
    assert batch.rc == 0, batch.explain()
    assert hashlib.sha256(cluster.key.read_bytes()).hexdigest() == original
    assert cluster.node_key(NODE) == original
    assert cluster.credential_crosses()

    # A key file made elsewhere: refused before it reaches any node.
    cluster.key.write_text("x" * 256)
    foreign = cluster.play("foreign-key", limit=NODE)
    assert foreign.rc != 0
    assert any(
        "is not the munge key the controller head-001 runs" in f for f in foreign.failures.get(NODE, [])
    ), foreign.failures
    assert cluster.node_key(NODE) == original
    assert cluster.credential_crosses()
