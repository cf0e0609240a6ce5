"""Containers as nodes: the stack's network, volumes and one systemd container per node.

Everything the provider creates carries the label ``clusterforge.stack=<stack>``; ``destroy``
removes by that label, so it takes exactly this stack's containers, network and volumes and
never anything of another stack or of the user. The one thing shared between stacks is the apt
archive cache volume (label ``clusterforge.cache=apt``), which ``destroy`` keeps on purpose.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from clusterforge.ansible.runner import PODMAN_CONNECTION
from clusterforge.providers.base import (
    DestroySummary,
    Node,
    PlannedNode,
    Progress,
    ProviderError,
    no_progress,
)
from clusterforge.providers.local.engine import Engine, EngineError
from clusterforge.providers.local.image import SHARED_APT_CACHE
from clusterforge.providers.local.share import (
    CGROUP_PARENT,
    CPU_PERIOD_US,
    CPU_WEIGHT,
    Share,
    node_shares,
    this_machine,
)
from clusterforge.spec.loader import REPO_ROOT
from clusterforge.spec.models import ClusterSpec
from clusterforge.waiting import wait_until

LABEL_STACK = "clusterforge.stack"
LABEL_NODE = "clusterforge.node"
LABEL_POOL = "clusterforge.pool"
LABEL_ROLE = "clusterforge.role"
LABEL_TYPE = "clusterforge.instance_type"
LABEL_CACHE = "clusterforge.cache"
LABEL_ADDRESS = "clusterforge.address"
LABEL_SHARE = "clusterforge.share"  # the share the node was given (Share.label), for people and `up`

APT_CACHE_VOLUME = "clusterforge-apt-cache"
BOOT_TIMEOUT_S = 180.0
REMOTE_TMP = "/var/tmp/.ansible-tmp"
FIRST_HOST_OFFSET = 9  # hosts() index 9 = .10: .1 is the gateway, the rest kept free for hand-made containers
# Filled by scripts/setup.d/45-roles-cluster.sh (pip install --target): torch for the nodes' checks.
NODE_TORCH_DIR = REPO_ROOT / ".clusterforge" / "node-torch"
NODE_TORCH_MOUNT = "/opt/clusterforge/torch"


@dataclass(frozen=True)
class NodeDef:
    """A node the spec asks for, with the engine names derived from it."""

    name: str
    pool: str
    role: str
    instance_type: str
    container: str


def network_name(stack: str) -> str:
    return f"clusterforge-{stack}"


def shared_volume_name(spec: ClusterSpec) -> str | None:
    shared = spec.storage.shared_volume
    return f"clusterforge-{spec.stack}-{shared.name}" if shared else None


def node_defs(spec: ClusterSpec) -> list[NodeDef]:
    return [
        NodeDef(name, pool.name, pool.role, pool.instance_type, f"{spec.stack}-{name}")
        for pool in spec.node_pools
        for name in spec.node_names(pool)
    ]


def connection_vars(engine: Engine, container: str) -> dict[str, str]:
    """Ansible reaches a container through the engine's connection plugin: no sshd needed.

    The podman plugin copies module files through ``podman mount`` (the container's overlay),
    which cannot see the tmpfs that systemd mode mounts on /tmp: the remote temp folder must
    be on the overlay, hence ``ansible_remote_tmp`` under /var/tmp (it outranks ANSIBLE_REMOTE_TMP).
    """
    common = {
        "ansible_host": container,
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_remote_tmp": REMOTE_TMP,
    }
    if engine.name == "podman":
        return {
            "ansible_connection": PODMAN_CONNECTION,
            "ansible_podman_executable": engine.binary,
            **common,
        }
    return {"ansible_connection": "community.docker.docker", **common}


def free_addresses(spec: ClusterSpec, taken: set[str]) -> Iterator[str]:
    """Addresses for new nodes: from .10 of the stack network up, skipping ``taken``.

    Fixed at creation (``--ip``), so a node keeps its address across restarts: with dynamic
    addresses a restarted node came back with another one, and anything rendered from the old
    address (inventory, Slurm) went stale.
    """
    network = spec.provider.network_cidr if spec.provider.kind == "local" else None
    if network is None:
        return
    for offset, host in enumerate(network.hosts()):
        if offset >= FIRST_HOST_OFFSET and str(host) not in taken:
            yield str(host)


def run_argv(
    engine: Engine,
    spec: ClusterSpec,
    node: NodeDef,
    image: str,
    apt_cache: bool,
    address: str = "",
    hosts: dict[str, str] | None = None,
    share: Share | None = None,
) -> list[str]:
    """The ``<engine> run`` arguments for one node container (``share``: its CPU and memory)."""
    labels = {
        LABEL_STACK: spec.stack,
        LABEL_NODE: node.name,
        LABEL_POOL: node.pool,
        LABEL_ROLE: node.role,
        LABEL_TYPE: node.instance_type,
    }
    argv = ["run", "-d", "--name", node.container, "--hostname", node.name]
    argv += ["--network", network_name(spec.stack)]
    if address:
        argv += ["--ip", address, "--label", f"{LABEL_ADDRESS}={address}"]
    # Peers by name through /etc/hosts, not the network's DNS server: aardvark-dns is restarted
    # whenever a container of the network starts, and meanwhile the other nodes' lookups (of peers
    # and of the Debian mirror) failed or hung (apt-get update hung for good after a node restart).
    for peer, peer_address in sorted((hosts or {}).items()):
        if peer != node.name:
            argv += ["--add-host", f"{peer}:{peer_address}"]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    if share is not None:
        argv += [
            "--cgroup-parent",
            CGROUP_PARENT,
            *share.engine_args(),
            "--label",
            f"{LABEL_SHARE}={share.label}",
        ]
    # NET_ADMIN: the network checks and fault injection use tc inside the node's own namespace.
    argv += ["--cap-add", "NET_ADMIN"]
    if engine.name == "podman":
        argv += ["--systemd=always"]
    else:  # docker has no --systemd: the usual recipe for systemd as PID 1 (not tested here)
        argv += ["--privileged", "--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw"]
        argv += ["--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp", "-e", "container=docker"]
    shared = shared_volume_name(spec)
    if shared and spec.storage.shared_volume:
        argv += ["-v", f"{shared}:{spec.storage.shared_volume.mount_point}"]
    if apt_cache:
        argv += ["-v", f"{APT_CACHE_VOLUME}:{SHARED_APT_CACHE}"]
    if (
        NODE_TORCH_DIR.is_dir()
    ):  # one torch install for all nodes (validators_runtime role, torch mode "shared")
        argv += ["-v", f"{NODE_TORCH_DIR}:{NODE_TORCH_MOUNT}:ro"]
    return [*argv, image, "/sbin/init"]


def _inspect_by_node(engine: Engine, stack: str) -> dict[str, dict[str, Any]]:
    ids = engine.container_ids({LABEL_STACK: stack})
    found = {}
    for info in engine.inspect_containers(ids):
        labels = info.get("Config", {}).get("Labels") or {}
        found[labels.get(LABEL_NODE, info.get("Name", "").lstrip("/"))] = info
    return found


def _state(info: dict[str, Any]) -> str:
    return str(info.get("State", {}).get("Status", "unknown")).lower()


def _address(info: dict[str, Any], network: str) -> str:
    networks = info.get("NetworkSettings", {}).get("Networks") or {}
    live = str((networks.get(network) or {}).get("IPAddress", ""))
    # A stopped container shows no address; the label keeps the one fixed at creation.
    return live or str((info.get("Config", {}).get("Labels") or {}).get(LABEL_ADDRESS, ""))


def taken_addresses(engine: Engine, spec: ClusterSpec) -> set[str]:
    """The addresses the stack's containers (any state) hold on its network."""
    network = network_name(spec.stack)
    return {a for a in (_address(i, network) for i in _inspect_by_node(engine, spec.stack).values()) if a}


def plan(engine: Engine, spec: ClusterSpec) -> list[PlannedNode]:
    existing = _inspect_by_node(engine, spec.stack)
    planned = []
    for node in node_defs(spec):
        info = existing.get(node.name)
        action: Literal["create", "start", "keep"] = (
            "create" if info is None else ("keep" if _state(info) == "running" else "start")
        )
        planned.append(PlannedNode(node.name, node.pool, node.role, node.instance_type, action))
    return planned


def ensure_network(engine: Engine, spec: ClusterSpec) -> None:
    name = network_name(spec.stack)
    if engine.run("network", "inspect", name, check=False).returncode == 0:
        return
    cidr = str(spec.provider.network_cidr) if spec.provider.kind == "local" else ""
    no_dns = ["--disable-dns"] if engine.name == "podman" else []  # names come from /etc/hosts (see run_argv)
    engine.run("network", "create", *no_dns, "--subnet", cidr, "--label", f"{LABEL_STACK}={spec.stack}", name)


def ensure_volumes(engine: Engine, spec: ClusterSpec, apt_cache: bool) -> None:
    wanted: list[tuple[str, str]] = []
    shared = shared_volume_name(spec)
    if shared:
        wanted.append((shared, f"{LABEL_STACK}={spec.stack}"))
    if apt_cache:
        wanted.append((APT_CACHE_VOLUME, f"{LABEL_CACHE}=apt"))
    for name, label in wanted:
        if engine.run("volume", "inspect", name, check=False).returncode != 0:
            engine.run("volume", "create", "--label", label, name)


OFFLINE_POLLS = 20  # "offline" this many times in a row (10 s at 0.5 s) is a container without systemd


def wait_booted(engine: Engine, container: str, timeout: float = BOOT_TIMEOUT_S) -> str:
    """Wait for systemd in the container to finish booting; return "running" or "degraded"."""

    offline = [0]  # consecutive "offline" answers

    def state() -> str:
        # --wait blocks while systemd is "starting"; it fails at once before dbus is up.
        proc = engine.run(
            "exec", container, "systemctl", "is-system-running", "--wait", check=False, timeout=timeout
        )
        lines = (proc.stdout.strip() or proc.stderr.strip()).splitlines()
        last = lines[-1] if lines else ""
        offline[0] = offline[0] + 1 if last == "offline" else 0
        return last

    # Booted, or a state systemd does not leave by itself. "offline" (no systemd as PID 1) is also
    # what systemctl says in a container's first instant, before systemd has made /run/systemd/system:
    # a bake's builder failed on it after 3.6 s (2026-12-05), so it ends the wait only when it stays.
    ended = ("running", "degraded", "maintenance", "stopping")
    last = wait_until(
        state, lambda s: s in ended or offline[0] >= OFFLINE_POLLS, timeout_s=timeout, poll_s=0.5
    )
    if last in ("running", "degraded"):
        return last
    failed = engine.run(
        "exec", container, "systemctl", "--failed", "--no-legend", "--plain", check=False
    ).stdout
    raise ProviderError(
        f"node container {container}: systemd did not finish booting within {timeout:.0f} s "
        f"(state {last or 'unknown'!r}); failed units: {failed.strip() or 'none'}; "
        f"see `podman logs {container}`"
    )


def current_share(info: dict[str, Any]) -> Share:
    """The share a container has now, from ``inspect`` (quota / period, cpuset, memory limit)."""
    host = info.get("HostConfig") or {}
    quota, period = int(host.get("CpuQuota") or 0), int(host.get("CpuPeriod") or 0)
    nano = int(host.get("NanoCpus") or 0)  # docker's --cpus (podman fills it in beside quota and period)
    cpus = quota / period if quota > 0 and period > 0 else nano / 1e9
    return Share(round(cpus, 3), int(host.get("Memory") or 0) >> 20, str(host.get("CpusetCpus") or ""))


def ensure_share(engine: Engine, container: str, info: dict[str, Any] | None, share: Share) -> str:
    """Give a running container its share (``<engine> update``) unless it was made with it; what was done.

    ``inspect`` shows what a container was made with: podman 4.3's ``update`` changes the cgroup but
    not the container's configuration (measured here: after ``update --cpus 0.25`` inspect still said
    0.5), so a restart brings the old share back, and it is given again on every ``up``; the message
    says how to make it the container's own."""
    host = (info or {}).get("HostConfig") or {}
    weighted = int(host.get("CpuShares") or 0) == CPU_WEIGHT
    rooted = str(host.get("CgroupParent") or "") == CGROUP_PARENT
    if info is not None and current_share(info) == share and weighted and rooted:
        return ""
    engine.run("update", *share.engine_args(), container)
    was = current_share(info).label if info is not None else "unknown"
    return (
        f"share set to {share.label} (made with {was}{'' if rooted else ', under the engine cgroup'}: "
        "`invoke down` and `up` make it its own)"
    )


@contextmanager
def heads_uncapped(
    engine: Engine, spec: ClusterSpec, names: Iterable[str], note: Progress = no_progress
) -> Iterator[list[str]]:
    """The head nodes among ``names`` without their CPU quota for the block, then with their share
    again; yields the heads lifted. An engine error is a note (``note(node, message)``), never raised:
    a head not lifted only converges slower.

    A head's share (0.25 CPU on 2 cores) keeps it from taking the compute nodes' CPU while they
    certify. While the stack converges it only slows site.yml's cluster play, whose every task waits
    for the slowest host: a 3-node stack's `up` spent 395 s there with the machine ~70 % idle, the
    head's modules running at a quarter of a core. Heads are never certified; compute nodes keep
    their share throughout (certification measures it, and a fault test may have capped one)."""
    wanted = set(names)
    shares = shares_for(spec)
    heads = [d for d in node_defs(spec) if d.name in wanted and d.role != "gpu" and d.name in shares]
    # The whole machine as the quota: podman 4.3 takes `--cpu-quota -1` and leaves the quota as it
    # was (measured here on cgroup v1: cpu.cfs_quota_us still 2500 after it).
    whole = ["--cpu-period", str(CPU_PERIOD_US), "--cpu-quota", str(this_machine().cpus * CPU_PERIOD_US)]
    lifted: list[NodeDef] = []
    for head in heads:
        try:
            engine.run("update", *whole, head.container)
            lifted.append(head)
        except EngineError as exc:
            note(head.name, f"CPU quota not lifted for the converge: {exc.stderr.strip() or exc}")
    try:
        yield [h.name for h in lifted]
    finally:
        for head in lifted:
            share = shares[head.name]
            try:
                engine.run("update", *share.engine_args(), head.container)
            except EngineError as exc:
                note(
                    head.name,
                    f"share {share.label} not given back after the converge ({exc.stderr.strip() or exc}): "
                    "`invoke down` and `up` make the node again",
                )


def shares_for(spec: ClusterSpec) -> dict[str, Share]:
    try:
        return node_shares(spec)
    except ValueError as exc:  # ShareError: the machine cannot hold the nodes; preflight says so first
        raise ProviderError(f"local provider: {exc}") from None


def create(
    engine: Engine,
    spec: ClusterSpec,
    image: str,
    progress: Progress,
    apt_cache: bool = True,
    pool_images: dict[str, str] | None = None,
) -> list[Node]:
    """Create what is missing of the stack; a new node boots ``pool_images[pool]`` (a baked image)
    where its pool has one, else ``image`` (the base node image)."""
    shares = shares_for(spec)
    ensure_network(engine, spec)
    ensure_volumes(engine, spec, apt_cache)
    existing = _inspect_by_node(engine, spec.stack)
    defs = node_defs(spec)
    hosts = {name: _address(info, network_name(spec.stack)) for name, info in existing.items()}
    addresses = free_addresses(spec, set(hosts.values()))
    cidr = spec.provider.network_cidr if spec.provider.kind == "local" else None
    for node in defs:
        if node.name not in existing:
            hosts[node.name] = next(addresses, "")
            if not hosts[node.name]:
                raise ProviderError(
                    f"provider.network_cidr: {cidr} has no free address for {node.name}: "
                    "choose a larger network (e.g. a /22)"
                )
    hosts = {name: address for name, address in hosts.items() if address}
    for node in defs:
        info = existing.get(node.name)
        share = shares.get(node.name)
        if info is None:
            what = f"; {share.label}" if share else ""
            progress(node.name, f"creating container ({hosts[node.name]}{what})")
            try:
                boots = (pool_images or {}).get(node.pool, image)
                engine.run(*run_argv(engine, spec, node, boots, apt_cache, hosts[node.name], hosts, share))
            except EngineError as exc:
                if "already in use" in exc.stderr:
                    raise ProviderError(
                        f"container name {node.container} is taken by a container that is not part of stack "
                        f"{spec.stack!r}: remove or rename it (`{engine.name} rm {node.container}`)"
                    ) from exc
                raise
        else:
            if _state(info) != "running":
                progress(node.name, f"starting existing container ({_state(info)})")
                engine.run("start", node.container)
            else:
                progress(node.name, "already running")
            # The node count changed since the node was made: it gets its new share.
            done = ensure_share(engine, node.container, info, share) if share else ""
            if done:
                progress(node.name, done)

    def boot(node: NodeDef) -> str:
        state = wait_booted(engine, node.container)
        if state == "degraded":  # up, but say which units failed
            failed = engine.exec(
                node.container, "systemctl", "--failed", "--no-legend", "--plain", check=False
            )
            state += f" (failed units: {', '.join(line.split()[0] for line in failed.splitlines() if line.split())})"
        progress(node.name, f"systemd {state}")
        return state

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(defs)))) as pool:
        list(pool.map(boot, defs))
        # Nodes made before others were added do not know them yet.
        list(pool.map(lambda node: sync_hosts(engine, node.container, hosts), defs))
    return nodes(engine, spec)


def sync_hosts(engine: Engine, container: str, hosts: dict[str, str]) -> None:
    """Add a line ``ADDRESS NAME`` to the node's /etc/hosts for every node it lacks."""
    script = "".join(
        f'grep -qE "^{address}[[:space:]]+{name}([[:space:]]|$)" /etc/hosts || echo "{address} {name}" >> /etc/hosts\n'
        for name, address in sorted(hosts.items())
    )
    engine.exec(container, "sh", "-c", script)


def nodes(engine: Engine, spec: ClusterSpec) -> list[Node]:
    existing = _inspect_by_node(engine, spec.stack)
    network = network_name(spec.stack)
    out = []
    for node in node_defs(spec):
        info = existing.get(node.name)
        if info is None:
            continue
        out.append(
            Node(
                name=node.name,
                address=_address(info, network),
                pool=node.pool,
                role=node.role,
                instance_type=node.instance_type,
                connection=connection_vars(engine, node.container),
                provider_id=str(info.get("Id", "")),
                state=_state(info),
            )
        )
    return out


def destroy(engine: Engine, stack: str) -> DestroySummary:
    """Remove the stack's containers, then its networks and volumes; all found by label."""
    labels = {LABEL_STACK: stack}
    summary = DestroySummary()
    ids = engine.container_ids(labels)
    if ids:
        names = [str(i.get("Name", "")).lstrip("/") for i in engine.inspect_containers(ids)]
        # -t 0: systemd nodes would otherwise take the full stop timeout each
        engine.run("rm", "-f", "-t", "0", *ids) if engine.name == "podman" else engine.run("rm", "-f", *ids)
        summary.containers = sorted(names)
    for net in engine.network_names(labels):
        engine.run("network", "rm", net)
        summary.networks.append(net)
    for vol in engine.volume_names(labels):
        engine.run("volume", "rm", vol)
        summary.volumes.append(vol)
    return summary
