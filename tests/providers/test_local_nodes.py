"""Container nodes: the engine arguments (unit), then for real (integration): systemd as PID 1,
names on the stack network, shared volume, labels, idempotent create, the machine apt cache,
and a destroy that takes exactly its own stack."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest

from clusterforge.providers.base import DestroySummary, ProviderError
from clusterforge.providers.local import nodes as nodes_mod
from clusterforge.providers.local.engine import Engine
from clusterforge.providers.local.image import SHARED_APT_CACHE
from clusterforge.providers.local.preflight import run_preflight
from clusterforge.spec.loader import load_spec, stack_path
from tests.fixtures.nodes import LocalStack

SPEC = load_spec(stack_path("local"))[0]


def test_run_argv_labels_systemd_network_and_volumes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(nodes_mod, "NODE_TORCH_DIR", tmp_path / "absent")
    node = nodes_mod.node_defs(SPEC)[1]
    assert (node.name, node.container, node.pool, node.role) == ("node-001", "local-node-001", "node", "gpu")
    hosts = {"head-001": "10.89.42.10", "node-001": "10.89.42.11", "node-002": "10.89.42.12"}
    argv = nodes_mod.run_argv(
        Engine("podman", "/usr/bin/podman"), SPEC, node, "IMG", True, "10.89.42.11", hosts
    )
    pairs = set(zip(argv, argv[1:], strict=False))
    assert {
        ("--name", "local-node-001"),
        ("--hostname", "node-001"),
        ("--network", "clusterforge-local"),
    } <= pairs
    assert ("--label", "clusterforge.stack=local") in pairs
    assert {("--label", "clusterforge.node=node-001"), ("--label", "clusterforge.pool=node")} <= pairs
    assert ("--label", "clusterforge.role=gpu") in pairs and "--systemd=always" in argv
    assert {("--ip", "10.89.42.11"), ("--label", "clusterforge.address=10.89.42.11")} <= pairs
    # peers through /etc/hosts (the network has no DNS server); its own name the engine adds
    assert {("--add-host", "head-001:10.89.42.10"), ("--add-host", "node-002:10.89.42.12")} <= pairs
    assert ("--add-host", "node-001:10.89.42.11") not in pairs
    assert ("-v", "clusterforge-local-shared:/shared") in pairs
    assert ("-v", f"clusterforge-apt-cache:{SHARED_APT_CACHE}") in pairs
    assert argv[-2:] == ["IMG", "/sbin/init"] and not any("torch" in a for a in argv)
    no_cache = nodes_mod.run_argv(Engine("podman", "podman"), SPEC, node, "IMG", apt_cache=False)
    assert not any("apt-cache" in a for a in no_cache)


def test_run_argv_mounts_shared_torch_read_only_when_present(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(nodes_mod, "NODE_TORCH_DIR", tmp_path)
    argv = nodes_mod.run_argv(
        Engine("podman", "podman"), SPEC, nodes_mod.node_defs(SPEC)[0], "IMG", apt_cache=False
    )
    assert ("-v", f"{tmp_path}:/opt/clusterforge/torch:ro") in set(zip(argv, argv[1:], strict=False))


def test_addresses_start_at_10_and_skip_taken() -> None:
    got = nodes_mod.free_addresses(SPEC, {"10.89.42.11"})
    assert [next(got) for _ in range(3)] == ["10.89.42.10", "10.89.42.12", "10.89.42.13"]
    assert len(list(nodes_mod.free_addresses(SPEC, set()))) == 254 - 9


def test_connection_vars_keep_remote_tmp_off_the_tmpfs() -> None:
    podman = nodes_mod.connection_vars(Engine("podman", "/usr/bin/podman"), "local-node-001")
    assert podman["ansible_connection"] == "podman_pipelined" and podman["ansible_host"] == "local-node-001"
    assert not podman["ansible_remote_tmp"].startswith("/tmp")
    docker = nodes_mod.connection_vars(Engine("docker", "/usr/bin/docker"), "local-node-001")
    assert docker["ansible_connection"] == "community.docker.docker"


def test_destroy_summary_counts_every_kind() -> None:
    assert DestroySummary().empty and DestroySummary().render() == "nothing to remove"
    local = DestroySummary(containers=["a", "b"], networks=["n"], volumes=["v"])
    assert local.render() == "removed 2 containers, 1 network, 1 volume"
    aws = DestroySummary(other={"instance": ["i-1", "i-2", "i-3"], "file system": ["fs-1"]})
    assert not aws.empty and aws.render() == "removed 3 instances, 1 file system"


class BootingEngine(Engine):
    """``systemctl is-system-running`` answers in turn from ``states``; ``--failed`` lists a unit."""

    def __init__(self, *states: str) -> None:
        super().__init__("podman", "podman")
        self.states, self.asked = list(states), 0

    def run(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if "--failed" in args:
            return subprocess.CompletedProcess(args, 0, "slurmd.service loaded failed failed\n", "")
        self.asked += 1
        state = self.states.pop(0)
        return subprocess.CompletedProcess(args, 0 if state == "running" else 1, f"{state}\n", "")


def test_wait_booted_asks_again_until_systemd_has_booted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("clusterforge.waiting.time.sleep", lambda _: None)
    engine = BootingEngine("Failed to connect to bus", "starting", "degraded")
    assert nodes_mod.wait_booted(engine, "local-node-001") == "degraded" and engine.asked == 3


def test_wait_booted_stops_at_a_state_systemd_does_not_leave(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("clusterforge.waiting.time.sleep", lambda _: None)
    engine = BootingEngine("starting", "maintenance", "running")
    with pytest.raises(ProviderError, match="state 'maintenance'.*slurmd.service"):
        nodes_mod.wait_booted(engine, "local-node-001")
    assert engine.asked == 2


def test_wait_booted_waits_out_offline_at_a_containers_start_but_not_for_ever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # systemctl says "offline" before systemd has made /run/systemd/system (a builder failed on it)
    monkeypatch.setattr("clusterforge.waiting.time.sleep", lambda _: None)
    engine = BootingEngine("offline", "offline", "starting", "running")
    assert nodes_mod.wait_booted(engine, "local-node-001") == "running" and engine.asked == 4
    stays = BootingEngine(*["offline"] * (nodes_mod.OFFLINE_POLLS + 5))  # no systemd as PID 1
    with pytest.raises(ProviderError, match="state 'offline'"):
        nodes_mod.wait_booted(stays, "local-node-001")
    assert stays.asked == nodes_mod.OFFLINE_POLLS


@pytest.fixture(scope="module")
def two(container_stack: Callable[..., LocalStack]) -> LocalStack:
    return container_stack(2)


@pytest.mark.integration
def test_nodes_run_systemd_and_have_addresses_in_the_stack_network(two: LocalStack) -> None:
    assert [n.name for n in two.nodes] == ["node-001", "node-002"]
    cidr = two.spec.provider.network_cidr
    for node in two.nodes:
        assert node.state == "running"
        assert ip_address(node.address) in cidr
        assert two.exec(node.name, "systemctl", "is-system-running").strip() == "running"
        assert two.exec(node.name, "cat", "/proc/1/comm").strip() == "systemd"
        assert two.exec(node.name, "hostname").strip() == node.name
        assert node.connection["ansible_connection"] == "podman_pipelined"
        assert node.connection["ansible_host"] == f"{two.spec.stack}-{node.name}"
    assert len({n.address for n in two.nodes}) == 2


@pytest.mark.integration
def test_nodes_reach_each_other_by_name(two: LocalStack) -> None:
    out = two.exec("node-001", "ping", "-c", "1", "-W", "5", "node-002")
    assert f"({two.node('node-002').address})" in out and "1 received" in out
    out = two.exec("node-002", "ping", "-c", "1", "-W", "5", "node-001")
    assert "1 received" in out


@pytest.mark.integration
def test_shared_volume_is_shared(two: LocalStack) -> None:
    mount = two.spec.storage.shared_volume.mount_point
    two.exec("node-001", "sh", "-c", f"echo written-by-node-001 > {mount}/probe")
    assert two.exec("node-002", "cat", f"{mount}/probe").strip() == "written-by-node-001"


@pytest.mark.integration
def test_apt_cache_is_shared_and_parallel_installs_do_not_collide(two: LocalStack) -> None:
    # Runs before the restart test on purpose: right after a node container restarts, the other
    # nodes' DNS through the host fails for a while here and `apt-get update` can hang (see README
    # of the local provider in INTERFACES.md); that is the machine's network, not the apt cache.
    names = [n.name for n in two.nodes]
    # Forget `hello` (a 50 kB package without dependencies) everywhere, so both nodes download it.
    for name in names:
        two.exec(
            name, "sh", "-c", f"rm -f {SHARED_APT_CACHE}/hello_*.deb /var/cache/apt/archives/hello_*.deb"
        )
    apt = ("env", "DEBIAN_FRONTEND=noninteractive", "apt-get")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda n: two.exec(n, *apt, "update", "-qq", timeout=300), names))
        # Both at once: with one archive folder shared by both nodes the second failed at once
        # with "Could not get lock /var/cache/apt/archives/lock".
        outputs = list(pool.map(lambda n: two.exec(n, *apt, "install", "-y", "hello", timeout=300), names))
    assert all("Setting up hello" in out for out in outputs)
    published = two.exec("node-001", "sh", "-c", f"ls {SHARED_APT_CACHE} | grep '^hello_'").split()
    assert len(published) == 1
    link = two.exec("node-002", "readlink", f"/var/cache/apt/archives/{published[0]}").strip()
    assert link == f"{SHARED_APT_CACHE}/{published[0]}"
    # node-002 forgets its own copy; the hook after `purge` links the shared one back: no download.
    two.exec("node-002", "rm", f"/var/cache/apt/archives/{published[0]}")
    two.exec("node-002", *apt, "purge", "-y", "hello")
    again = two.exec("node-002", *apt, "install", "-y", "hello")
    assert "Need to get 0 B" in again, again


@pytest.mark.integration
def test_labels_name_stack_node_pool_and_role(two: LocalStack) -> None:
    engine = two.engine()
    info = engine.json("container", "inspect", *(n.provider_id for n in two.nodes))
    labels = {i["Config"]["Labels"]["clusterforge.node"]: i["Config"]["Labels"] for i in info}
    for node in two.nodes:
        assert labels[node.name]["clusterforge.stack"] == two.spec.stack
        assert labels[node.name]["clusterforge.pool"] == "node"
        assert labels[node.name]["clusterforge.role"] == "gpu"


@pytest.mark.integration
def test_create_again_keeps_running_nodes_and_restarts_a_stopped_one(two: LocalStack) -> None:
    assert {p.action for p in two.provider.plan(two.spec)} == {"keep"}
    engine = two.engine()
    engine.run("stop", "-t", "0", two.node("node-002").provider_id)  # the node dies (SIGKILL at once)
    plan = {p.name: p.action for p in two.provider.plan(two.spec)}
    assert plan == {"node-001": "keep", "node-002": "start"}
    events: list[tuple[str, str]] = []
    again = two.provider.create(two.spec, lambda node, message: events.append((node, message)))
    assert [n.provider_id for n in again] == [n.provider_id for n in two.nodes]
    assert [n.address for n in again] == [n.address for n in two.nodes]  # fixed at creation (--ip)
    assert all(n.state == "running" for n in again)
    assert ("node-001", "already running") in events
    assert any(node == "node-002" and message.startswith("starting existing") for node, message in events)
    assert two.exec("node-002", "systemctl", "is-system-running").strip() == "running"
    two.nodes = again


@pytest.mark.integration
def test_destroy_takes_exactly_its_stack(container_stack: Callable[..., LocalStack]) -> None:
    doomed = container_stack(1)
    engine = doomed.engine()
    # A decoy whose stack name starts with ours: a prefix match would take it.
    decoy = f"{doomed.spec.stack}0"
    image = engine.json("container", "inspect", doomed.nodes[0].provider_id)[0]["Image"]
    try:
        engine.run("volume", "create", "--label", f"clusterforge.stack={decoy}", f"clusterforge-{decoy}-data")
        engine.run(
            "run", "-d", "--name", f"{decoy}-node-001", "--label", f"clusterforge.stack={decoy}",
            "--network", "none", image, "/bin/sleep", "infinity",
        )  # fmt: skip
        summary = doomed.provider.destroy(doomed.spec)
        assert summary.containers == [f"{doomed.spec.stack}-node-001"]
        assert summary.networks == [f"clusterforge-{doomed.spec.stack}"]
        assert summary.volumes == [f"clusterforge-{doomed.spec.stack}-shared"]
        label = {"clusterforge.stack": doomed.spec.stack}
        assert engine.container_ids(label) == [] and engine.network_names(label) == []
        assert engine.volume_names(label) == []
        assert len(engine.container_ids({"clusterforge.stack": decoy})) == 1
        assert engine.volume_names({"clusterforge.stack": decoy}) == [f"clusterforge-{decoy}-data"]
        assert nodes_mod.APT_CACHE_VOLUME in engine.volume_names({"clusterforge.cache": "apt"})
        assert doomed.provider.destroy(doomed.spec).empty  # a second destroy finds nothing
        assert doomed.provider.nodes(doomed.spec) == []
    finally:
        nodes_mod.destroy(engine, decoy)


@pytest.mark.integration
def test_preflight_finds_taken_network_range_and_container_name(two: LocalStack) -> None:
    engine = two.engine()
    clash = two.spec.model_copy(update={"stack": f"{two.spec.stack}x"})  # same network_cidr as `two`
    squatter = f"{clash.stack}-node-001"
    image = engine.json("container", "inspect", two.nodes[0].provider_id)[0]["Image"]
    engine.run("create", "--name", squatter, "--network", "none", image, "/bin/true")
    try:
        problems = {p.check_id: p.message for p in run_preflight(clash, engine=engine)}
        assert set(problems) == {"network-cidr-taken", "container-name-taken"}, json.dumps(problems)
        assert f"clusterforge-{two.spec.stack}" in problems["network-cidr-taken"]
        assert f"rm -f {squatter}" in problems["container-name-taken"]
        assert run_preflight(two.spec, engine=engine) == []  # its own network and containers are fine
    finally:
        engine.run("rm", "-f", squatter)
