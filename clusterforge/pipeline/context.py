"""What the stages of one `up`/`certify` share: spec, provider, journal, paths, live nodes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clusterforge.ansible.runner import REPO_ROOT, ansible_env, run_stamp
from clusterforge.ansible.scale import scale_for
from clusterforge.cluster_secrets import KeyStore, after_converge, before_converge, key_store
from clusterforge.journal import Journal, stack_dir
from clusterforge.node.remote import Runner, node_runner
from clusterforge.pipeline.display import Board
from clusterforge.providers.base import Node, Provider
from clusterforge.spec.models import ClusterSpec

PLAYBOOKS = REPO_ROOT / "playbooks"
INVENTORIES = REPO_ROOT / "inventories"
# The validators CLI as installed on nodes by the validators_runtime role.
NODE_VALIDATORS = ("/usr/local/bin/clusterforge-validators",)


def stack_env(spec: ClusterSpec, state: Path) -> dict[str, str]:
    """ansible-playbook's environment for a stack: its state folders, the fleet's forks and fact
    cache (the spec's ``ansible`` section), the project's collections and container engine config."""
    settings = spec.ansible
    scale = scale_for(
        state,
        max_forks=settings.max_forks,
        forks=settings.forks,
        fact_cache_timeout_s=settings.fact_cache_timeout_s,
    )
    env = ansible_env(state, scale)
    collections = REPO_ROOT / ".clusterforge" / "collections"
    if collections.exists():
        env.setdefault("ANSIBLE_COLLECTIONS_PATH", str(collections))
    if spec.provider.kind == "local":
        from clusterforge.providers.local.config import write_podman_config

        env.update(write_podman_config())
    return env


@dataclass(frozen=True)
class StackPaths:
    """Where a stack's state lives on the workstation (all under .clusterforge/<stack>/)."""

    state: Path
    run: Path  # this invocation's run folder: runs/<timestamp>/ (Ansible logs, NODE.json files)
    reports: Path  # reports/<node>/report.json, junit.xml, network-report.json
    inventory: Path  # inventories/<stack>/
    munge_key: Path

    @classmethod
    def for_stack(cls, stack: str, inventories: Path = INVENTORIES) -> StackPaths:
        state = stack_dir(stack)
        return cls(
            state=state,
            run=state / "runs" / run_stamp(),
            reports=state / "reports",
            inventory=inventories / stack,
            munge_key=state / "munge.key",
        )


@dataclass
class Options:
    recertify: bool = False
    profile: str | None = None  # certification profile override (else each pool's own)
    only: frozenset[str] | None = None  # certify: these nodes only
    converge: bool = False  # up --converge: run Ansible on every node, even where no drift is found
    # up --allow-replace NAME: data-holding resources (AWS: FSx, the checkpoint bucket) this run may
    # replace or delete; any other such change stops the provision with nothing changed.
    allow_replace: frozenset[str] = frozenset()


@dataclass
class StackContext:
    spec: ClusterSpec
    provider: Provider
    journal: Journal
    paths: StackPaths
    board: Board
    options: Options = field(default_factory=Options)
    nodes: dict[str, Node] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    playbooks: Path = PLAYBOOKS
    # How commands reach a node (the head's scontrol/sinfo/sbatch); tests inject a fake Slurm.
    runner: Callable[..., Runner] = node_runner
    # Where the cluster's munge key lives beside this workstation (AWS: SSM); tests inject a fake.
    key_store: Callable[[ClusterSpec], KeyStore | None] = key_store
    _store: list[KeyStore | None] = field(default_factory=list)

    def munge_store(self) -> KeyStore | None:
        if not self._store:
            self._store.append(self.key_store(self.spec))
        return self._store[0]

    def before_converge(self) -> None:
        """The cluster's munge key in the local file before Ansible reads it (cluster_secrets)."""
        note = before_converge(self.paths.munge_key, self.munge_store())
        if note:
            self.board.note(self.spec.stack, note)

    def after_converge(self) -> None:
        note = after_converge(self.paths.munge_key, self.munge_store())
        if note:
            self.board.note(self.spec.stack, note)

    def secrets(self) -> list[bytes]:
        """Values that must never be printed: the cluster's munge key."""
        try:
            return [self.paths.munge_key.read_bytes()]
        except OSError:
            return []

    def env(self) -> dict[str, str]:
        return stack_env(self.spec, self.paths.state)

    def heads(self) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.role == "head"), key=lambda n: n.name)

    def compute(self) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.role == "gpu"), key=lambda n: n.name)

    @property
    def hosts_file(self) -> Path:
        return self.paths.inventory / "hosts.yml"
