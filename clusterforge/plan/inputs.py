"""What each node's configuration is made of, reduced to fingerprints a plan can compare.

One side of a plan (the working tree, a git ref, or what the last converge applied) is a
``StackInputs``: per node, the machine it runs on, a hash per role of the role's files and of
the variables the inventory renders for that host, the pinned versions it receives, the inputs
that need a reboot when they change, and its certification profile with its thresholds.

Nodes are rendered with empty addresses and connection vars so that a fingerprint depends on
the spec, roles, playbooks and catalogues only, never on where a machine happens to be: the
record the pipeline writes after a converge and the plan computed later compare equal when
nothing changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from clusterforge.catalog.hardware import HardwareCatalog, read_hardware
from clusterforge.inventory import ROLE_GROUPS, render_inventory
from clusterforge.providers.base import Node
from clusterforge.spec.models import ClusterSpec

INPUTS_VERSION = 1
SITE_PLAYBOOK = "playbooks/site.yml"
HARDWARE_FILE = "clusterforge/data/hardware.yaml"

# Folders outside roles/<role>/ that a role ships to nodes: validators_runtime copies the suite
# from "{{ playbook_dir }}/../validators" (roles/validators_runtime/defaults/main.yml).
EXTRA_ROLE_SOURCES: Mapping[str, tuple[str, ...]] = {"validators_runtime": ("validators",)}

# Variables whose change needs a reboot, per role, and the variable that says whether the role
# manages a kernel module on the host at all. The nvidia_driver role notifies "nvidia_driver
# reboot needed" when the loaded module's version differs from nvidia_driver_version
# (roles/nvidia_driver/tasks/gpu.yml, handlers/main.yml); containers share the host's kernel
# (nvidia_driver_kernel_module_install: false) and never reboot for it.
REBOOT_INPUTS: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "nvidia_driver": (
        "nvidia_driver_kernel_module_install",
        ("nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_kernel_module"),
    ),
}

# Spec keys of a pool that decide the machine itself (with its instance type and OS image): a
# change replaces the node.
MACHINE_KEYS = ("root_volume", "placement_group")

_SKIP_PARTS = {"__pycache__", ".pytest_cache", "tests"}


def digest(data: Any) -> str:
    """A short stable hash of JSON-able data (sorted keys, so dict order never matters)."""
    text = json.dumps(data, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RoleInputs:
    files: str  # hash of the role's files (and what it ships from elsewhere)
    variables: str  # hash of the <role>_* variables this host receives

    def key(self) -> tuple[str, str]:
        return (self.files, self.variables)


@dataclass(frozen=True)
class NodeInputs:
    name: str
    pool: str
    role: str  # "gpu" | "head" | "login"
    instance_type: str
    machine: dict[str, str] = field(default_factory=dict)  # what a change of replaces the machine
    roles: dict[str, RoleInputs] = field(default_factory=dict)  # in play order
    pinned: dict[str, str] = field(default_factory=dict)  # <role>_*_version -> version
    reboot: dict[str, str] = field(default_factory=dict)  # kernel-level inputs, where managed
    certification: str = ""  # hash of the profile and thresholds ("" when never certified)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeInputs:
        roles = {name: RoleInputs(**value) for name, value in (data.get("roles") or {}).items()}
        return cls(
            name=str(data["name"]),
            pool=str(data.get("pool", "")),
            role=str(data.get("role", "")),
            instance_type=str(data.get("instance_type", "")),
            machine={str(k): str(v) for k, v in (data.get("machine") or {}).items()},
            roles=roles,
            pinned={str(k): str(v) for k, v in (data.get("pinned") or {}).items()},
            reboot={str(k): str(v) for k, v in (data.get("reboot") or {}).items()},
            certification=str(data.get("certification", "")),
        )


@dataclass(frozen=True)
class StackInputs:
    """One side of a plan: where it came from (for messages) and its nodes by name."""

    label: str  # "working tree", "main", "last applied state (journal)"
    nodes: dict[str, NodeInputs] = field(default_factory=dict)


# --- reading a tree ------------------------------------------------------------------------


def _files(folder: Path) -> Iterator[Path]:
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*")):
        skipped = _SKIP_PARTS & set(path.relative_to(folder).parts) or path.suffix in (".pyc", ".pyo")
        if path.is_file() and not skipped:
            yield path


def tree_hash(root: Path, folders: tuple[str, ...]) -> str:
    """Hash of every file's relative path and content under ``folders`` of ``root``."""
    h = hashlib.sha256()
    for rel in folders:
        for path in _files(root / rel):
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Play:
    hosts: tuple[str, ...]
    roles: tuple[tuple[str, dict[str, Any]], ...]  # (role, play-level role vars)


def read_plays(root: Path, playbook: str = SITE_PLAYBOOK) -> list[Play]:
    """The plays of ``playbook`` in order, following ``import_playbook`` (relative to its folder)."""
    path = root / playbook
    data = yaml.safe_load(path.read_text()) or []
    plays: list[Play] = []
    for item in data:
        imported = item.get("ansible.builtin.import_playbook") or item.get("import_playbook")
        if imported:
            plays += read_plays(root, str(Path(playbook).parent / imported))
            continue
        hosts = item.get("hosts", "")
        patterns = tuple(h.strip() for h in (hosts if isinstance(hosts, list) else str(hosts).split(",")))
        roles: list[tuple[str, dict[str, Any]]] = []
        for entry in item.get("roles") or []:
            if isinstance(entry, str):
                roles.append((entry, {}))
            else:
                roles.append((str(entry.get("role") or entry.get("name")), dict(entry.get("vars") or {})))
        plays.append(Play(patterns, tuple(roles)))
    return plays


# Groups a run makes (group_by) and the inventory group their hosts come from: a play on one may
# apply its roles to any host of that group. Role node_image sorts gpu_nodes into these two
# (playbooks/node_software.yml: the node software runs on node_software_needed).
RUN_GROUPS: Mapping[str, str] = {"node_software_needed": "gpu_nodes", "node_software_baked": "gpu_nodes"}


def node_groups(node: Node) -> set[str]:
    """The inventory groups a host is in (inventory.render_hosts), and the run's groups it may join."""
    groups = {"all", ROLE_GROUPS.get(node.role, ""), f"pool_{node.pool.replace('-', '_')}", node.name}
    return groups | {made for made, source in RUN_GROUPS.items() if source in groups}


def roles_for(plays: list[Play], node: Node) -> dict[str, list[dict[str, Any]]]:
    """Role -> the play-level vars of each play that applies it to this host, in play order."""
    groups = node_groups(node)
    out: dict[str, list[dict[str, Any]]] = {}
    for play in plays:
        if groups & set(play.hosts):
            for role, play_vars in play.roles:
                out.setdefault(role, []).append(play_vars)
    return out


def placeholder_nodes(spec: ClusterSpec) -> list[Node]:
    """The spec's nodes without addresses or connections (see the module docstring)."""
    return [
        Node(name, "", pool.name, pool.role, pool.instance_type, {})
        for pool in spec.node_pools
        for name in spec.node_names(pool)
    ]


def read_tree_hardware(root: Path) -> HardwareCatalog:
    """The hardware catalogue under ``root`` (the packaged one when the tree has none)."""
    hw_file = root / HARDWARE_FILE
    return read_hardware(hw_file) if hw_file.exists() else _packaged_hardware()


@dataclass
class _Tree:
    """One side's roles, plays and shared variables, each hashed once for the whole fleet."""

    root: Path
    plays: list[Play]
    shared: dict[str, Any]
    role_files: dict[str, str] = field(default_factory=dict)
    shared_digest: dict[str, str] = field(default_factory=dict)

    def files(self, role: str) -> str:
        if role not in self.role_files:
            self.role_files[role] = tree_hash(self.root, (f"roles/{role}", *EXTRA_ROLE_SOURCES.get(role, ())))
        return self.role_files[role]

    def role_vars(self, role: str) -> str:
        # slurm_nodes lists every node: hashed once, not once per host.
        if role not in self.shared_digest:
            self.shared_digest[role] = digest(
                {k: v for k, v in self.shared.items() if k.startswith(f"{role}_")}
            )
        return self.shared_digest[role]


def _node_inputs(
    tree: _Tree, spec: ClusterSpec, node: Node, host: dict[str, Any], hw: HardwareCatalog
) -> NodeInputs:
    variables = {**tree.shared, **host}
    roles: dict[str, RoleInputs] = {}
    pinned: dict[str, str] = {}
    reboot: dict[str, str] = {}
    for role, play_vars in roles_for(tree.plays, node).items():
        prefix = f"{role}_"
        own = {k: v for k, v in host.items() if k.startswith(prefix)}
        roles[role] = RoleInputs(tree.files(role), digest([tree.role_vars(role), own, play_vars]))
        if variables.get(f"{role}_enabled", True) is False:
            continue  # a switched-off role installs nothing: its versions pin nothing here
        mine = {k: v for k, v in variables.items() if k.startswith(prefix) and k.endswith("_version")}
        pinned.update({k: str(v) for k, v in mine.items() if v})
        if role in REBOOT_INPUTS:
            switch, keys = REBOOT_INPUTS[role]
            # <role>_skip_reboot moves the reboot out of the role, not away: on SSM stacks the
            # pipeline reboots the node (clusterforge.providers.aws.reboots), so it still counts.
            if variables.get(switch, True):
                reboot.update({k: str(variables.get(k, "")) for k in keys})
    pool = spec.pool(node.pool)
    machine = {"instance_type": pool.instance_type, "os_image": spec.software.os_image}
    machine.update({k: digest(getattr(pool, k)) for k in MACHINE_KEYS})
    ami = getattr(spec.provider, "ami", None)
    if ami:
        machine["ami"] = str(ami)
    certification = ""
    if pool.certification and pool.certification in spec.certification.profiles:
        profile = spec.certification.profiles[pool.certification].model_dump(mode="json")
        figures = hw.thresholds_for(pool.instance_type) if pool.instance_type in hw else {}
        certification = digest([profile, figures])
    return NodeInputs(
        node.name,
        node.pool,
        node.role,
        node.instance_type,
        machine=machine,
        roles=roles,
        pinned=pinned,
        reboot=reboot,
        certification=certification,
    )


def stack_inputs(
    spec: ClusterSpec, root: Path, label: str, hardware: HardwareCatalog | None = None
) -> StackInputs:
    """Fingerprint every node of ``spec`` against the roles, playbooks and catalogue under ``root``."""
    hw = hardware or read_tree_hardware(root)
    nodes = placeholder_nodes(spec)
    inventory = render_inventory(spec, nodes, Path("munge.key"), catalog=hw)
    shared: dict[str, Any] = {}
    for variables in inventory.group_vars.values():
        shared.update(variables)
    tree = _Tree(root, read_plays(root), shared)
    hosts: dict[str, dict[str, Any]] = {}
    for group in inventory.hosts["all"]["children"].values():
        for name, hv in group.get("hosts", {}).items():
            if hv:
                hosts[name] = hv
    # Nodes of one pool with the same host variables get the same inputs: compute each once.
    named = {h for play in tree.plays for h in play.hosts}
    cache: dict[tuple[str, str, str], NodeInputs] = {}
    out: dict[str, NodeInputs] = {}
    for n in nodes:
        host = hosts.get(n.name, {})
        key = (n.pool, digest(host), n.name if n.name in named else "")
        if key not in cache:
            cache[key] = _node_inputs(tree, spec, n, host, hw)
        out[n.name] = replace(cache[key], name=n.name)
    return StackInputs(label, out)


def _packaged_hardware() -> HardwareCatalog:
    from clusterforge.catalog import load_hardware

    return load_hardware()
