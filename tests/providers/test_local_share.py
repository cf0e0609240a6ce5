"""Each container node's fixed share of the machine: sized from the cores, the node count and the
head node's needs; given to the container at creation (and again when the count changes); declared
in Slurm's node lines; refused, with the fix, when the machine cannot hold the stack."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusterforge.catalog import load_hardware
from clusterforge.inventory import render_inventory
from clusterforge.providers.base import Node
from clusterforge.providers.local import nodes as nodes_mod
from clusterforge.providers.local import preflight
from clusterforge.providers.local import share as share_mod
from clusterforge.providers.local.engine import Engine, EngineError
from clusterforge.providers.local.share import Machine, Share, ShareError, node_shares
from clusterforge.spec.loader import load_spec, stack_path
from clusterforge.spec.models import ClusterSpec

SPEC = load_spec(stack_path("local"))[0]  # a head and 4 compute nodes
RULES = load_hardware()["local"].share
assert RULES is not None
TWO_CORES = Machine(cpus=2, memory_mib=24_000)  # the project's machines (ENVIRONMENT.md)


def with_nodes(count: int) -> ClusterSpec:
    data = SPEC.model_dump(mode="json", exclude_none=True)
    for pool in data["node_pools"]:
        if pool["role"] == "gpu":
            pool["count"] = count
    return ClusterSpec.model_validate(data)


def test_two_cores_four_nodes_and_a_head_each_node_gets_an_equal_quota() -> None:
    shares = node_shares(SPEC, machine=TWO_CORES)
    reserved = RULES.head_cpus + RULES.workstation_cpus
    compute = [shares[f"node-00{i}"] for i in range(1, 5)]
    assert len(set(compute)) == 1 and not compute[0].cpuset  # a fraction of a core: a quota, no cpuset
    assert compute[0].cpus == pytest.approx((2 - reserved) / 4, abs=0.001)
    assert sum(s.cpus for s in compute) + reserved <= 2  # a healthy node always gets its whole quota
    assert shares["head-001"] == Share(RULES.head_cpus, RULES.head_memory_mib)
    assert compute[0].memory_mib == load_hardware()["local"].memory_mib
    three = node_shares(with_nodes(3), machine=TWO_CORES)["node-001"]
    assert three.cpus == pytest.approx((2 - reserved) / 3, abs=0.001) and three.cpus > compute[0].cpus


def test_a_machine_with_a_core_per_node_pins_each_node_to_cores_of_its_own() -> None:
    shares = node_shares(SPEC, machine=Machine(16, 64_000))
    first = -(-int((RULES.head_cpus + RULES.workstation_cpus) * 1000) // 1000)  # the cores head and host keep
    whole = int((16 - RULES.head_cpus - RULES.workstation_cpus) / 4)
    sets = [shares[f"node-00{i}"].cpuset for i in range(1, 5)]
    assert sets == [f"{first + i * whole}-{first + (i + 1) * whole - 1}" for i in range(4)]
    assert {shares[f"node-00{i}"].cpus for i in range(1, 5)} == {float(whole)}
    assert shares["node-001"].slurm_cpus == whole and shares["node-001"].label.endswith(
        " pinned, 2048 MiB"
    ) is (load_hardware()["local"].memory_mib == 2048)


def test_too_many_nodes_for_the_cores_is_refused_with_the_fix() -> None:
    with pytest.raises(ShareError, match=r"2 CPU\(s\) cannot give 12 local compute node\(s\)") as err:
        node_shares(with_nodes(12), machine=TWO_CORES)
    assert "Use at most" in str(err.value) and "the gpu pool's count" in str(err.value)
    assert preflight.check_share(with_nodes(12), TWO_CORES)[0].check_id == "node-share"
    assert preflight.check_share(SPEC, TWO_CORES) == []


def test_too_little_memory_for_the_nodes_is_refused_with_the_fix() -> None:
    with pytest.raises(ShareError, match=r"need \d+ MiB, more than 75% of this machine's 4000 MiB"):
        node_shares(SPEC, machine=Machine(2, 4000))


def test_the_share_as_engine_arguments_a_label_and_a_slurm_line() -> None:
    share = Share(0.375, 2048)
    # capped by the quota, and guaranteed: a weight of 64 plain processes beside the machine's own
    # 0.375 CPU as 3.75 ms per 10 ms (a 100 ms period quantised the gloo check: share.py)
    assert share.engine_args() == [
        "--cpu-period",
        "10000",
        "--cpu-quota",
        "3750",
        "--cpu-shares",
        "65536",
        "--memory",
        "2048m",
    ]
    assert share.label == "0.375 CPU, 2048 MiB" and share.slurm_cpus == 1  # under a core: one CPU
    pinned = Share(3.0, 4096, "1-3")
    assert pinned.engine_args()[-2:] == ["--cpuset-cpus", "1-3"] and pinned.slurm_cpus == 3
    assert pinned.label == "3 CPU pinned, 4096 MiB"


def test_run_argv_gives_the_container_its_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(nodes_mod, "NODE_TORCH_DIR", tmp_path / "absent")
    node = nodes_mod.node_defs(SPEC)[1]
    share = Share(0.375, 2048)
    argv = nodes_mod.run_argv(Engine("podman", "podman"), SPEC, node, "IMG", False, share=share)
    pairs = set(zip(argv, argv[1:], strict=False))
    assert {
        ("--cpu-period", "10000"),
        ("--cpu-quota", "3750"),
        ("--cpu-shares", "65536"),
        ("--memory", "2048m"),
        ("--cgroup-parent", "/"),  # beside the machine's processes, not under the engine's one parent
        ("--label", "clusterforge.share=0.375 CPU, 2048 MiB"),
    } <= pairs
    assert "--cpu-quota" not in nodes_mod.run_argv(Engine("podman", "podman"), SPEC, node, "IMG", False)


class UpdateRecorder(Engine):
    def __init__(self) -> None:
        super().__init__("podman", "/nonexistent/podman")
        self.calls: list[tuple[str, ...]] = []

    def run(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:  # type: ignore[override]
        self.calls.append(args)
        return subprocess.CompletedProcess(args, 0, "", "")


# `podman inspect` HostConfig of a node container run with its share (--cgroup-parent / --cpus 0.5
# --cpu-shares 65536 --memory 2048m); podman 4.3 here records NanoCpus and the quota and period,
# docker NanoCpus only (podman measured with 0.5 CPU and --cpu-shares 16384: "CpuShares": 16384,
# "CpuQuota": 50000, "CpuPeriod": 100000, "NanoCpus": 500000000, "CgroupParent": "/").
PODMAN_HALF = {
    "HostConfig": {
        "CpuQuota": 50000, "CpuPeriod": 100000, "NanoCpus": 500000000, "CpuShares": 65536, "Memory": 2147483648,
        "CpusetCpus": "", "CgroupParent": "/",
    }
}  # fmt: skip
DOCKER_HALF = {
    "HostConfig": {
        "NanoCpus": 500000000, "CpuQuota": 0, "CpuPeriod": 0, "CpuShares": 65536, "Memory": 2147483648,
        "CgroupParent": "/",
    }
}  # fmt: skip


@pytest.mark.parametrize("info", [PODMAN_HALF, DOCKER_HALF])
def test_up_gives_an_existing_node_its_share_again_only_when_it_changed(info: dict[str, Any]) -> None:
    assert nodes_mod.current_share(info) == Share(0.5, 2048)
    engine = UpdateRecorder()
    assert nodes_mod.ensure_share(engine, "local-node-001", info, Share(0.5, 2048)) == ""
    assert engine.calls == []  # already has it: nothing to do
    done = nodes_mod.ensure_share(engine, "local-node-001", info, Share(0.375, 2048))
    assert engine.calls == [
        (
            "update",
            "--cpu-period",
            "10000",
            "--cpu-quota",
            "3750",
            "--cpu-shares",
            "65536",
            "--memory",
            "2048m",
            "local-node-001",
        )
    ]
    assert (
        done
        == "share set to 0.375 CPU, 2048 MiB (made with 0.5 CPU, 2048 MiB: `invoke down` and `up` make it its own)"
    )


def test_a_node_made_before_shares_is_capped_and_told_how_to_get_its_own_cgroup() -> None:
    old = {"HostConfig": {"CpuQuota": 0, "CpuPeriod": 0, "CpuShares": 0, "Memory": 0, "CgroupParent": ""}}
    engine = UpdateRecorder()
    done = nodes_mod.ensure_share(engine, "local-node-001", old, Share(0.375, 2048))
    assert engine.calls and done.startswith(
        "share set to 0.375 CPU, 2048 MiB (made with 0 CPU, 0 MiB, under the engine"
    )


def test_slurm_node_lines_declare_the_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(share_mod, "this_machine", lambda: TWO_CORES)
    nodes = [
        Node(name, f"10.89.42.{10 + i}", pool, role, "local", {"ansible_connection": "podman_pipelined"})
        for i, (name, pool, role) in enumerate([("head-001", "head", "head"), ("node-001", "node", "gpu")])
    ]
    inv = render_inventory(SPEC, nodes, tmp_path / "munge.key")
    (entry,) = inv.group_vars["slurm"]["slurm_nodes"]
    share = node_shares(SPEC, machine=TWO_CORES)["node-001"]
    assert entry["cpus"] == share.slurm_cpus == 1
    assert entry["real_memory_mb"] == int(share.memory_mib * 0.95)
    monkeypatch.setattr(share_mod, "this_machine", lambda: Machine(16, 64_000))
    (big,) = render_inventory(SPEC, nodes, tmp_path / "munge.key").group_vars["slurm"]["slurm_nodes"]
    assert big["cpus"] == node_shares(SPEC, machine=Machine(16, 64_000))["node-001"].slurm_cpus > 1


def test_only_local_stacks_have_shares() -> None:
    prod = load_spec(stack_path("prod"))[0]
    assert node_shares(prod, machine=TWO_CORES) == {}
    assert share_mod.compute_share_label(prod) == ""


class FailingUpdates(UpdateRecorder):
    """An engine whose ``update`` fails for the containers named (the rest are recorded)."""

    def __init__(self, *failing: str) -> None:
        super().__init__()
        self.failing = set(failing)

    def run(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:  # type: ignore[override]
        self.calls.append(args)
        if args[-1] in self.failing:
            raise EngineError([self.binary, *args], 125, "Error: no such container")
        return subprocess.CompletedProcess(args, 0, "", "")


def test_a_converge_lifts_only_the_heads_cap_and_gives_its_share_back_after() -> None:
    engine = UpdateRecorder()
    share = node_shares(SPEC)["head-001"]
    with nodes_mod.heads_uncapped(engine, SPEC, ["head-001", "node-001", "node-002"]) as lifted:
        assert lifted == ["head-001"]
        # compute nodes keep their share: certification measures it, and a fault test may cap one
        # the whole machine as its quota (podman 4.3 ignores a quota of -1)
        cores = share_mod.this_machine().cpus
        assert engine.calls == [
            ("update", "--cpu-period", "10000", "--cpu-quota", str(cores * 10000), "local-head-001")
        ]
    assert engine.calls[1] == ("update", *share.engine_args(), "local-head-001")
    assert len(engine.calls) == 2


def test_the_heads_share_comes_back_when_the_converge_fails() -> None:
    engine = UpdateRecorder()
    with pytest.raises(RuntimeError), nodes_mod.heads_uncapped(engine, SPEC, ["head-001"]):
        raise RuntimeError("ansible-runner died")
    share = node_shares(SPEC)["head-001"]
    assert engine.calls[-1] == ("update", *share.engine_args(), "local-head-001")


def test_a_batch_without_its_head_lifts_nothing() -> None:
    engine = UpdateRecorder()
    with nodes_mod.heads_uncapped(engine, SPEC, ["node-003"]) as lifted:
        assert lifted == []
    assert engine.calls == []


def test_an_engine_that_cannot_update_is_a_note_never_a_failed_converge() -> None:
    notes: list[tuple[str, str]] = []
    engine = FailingUpdates("local-head-001")
    with nodes_mod.heads_uncapped(engine, SPEC, ["head-001"], lambda n, m: notes.append((n, m))) as lifted:
        assert lifted == []  # not lifted: nothing to give back
    assert notes == [("head-001", "CPU quota not lifted for the converge: Error: no such container")]
    assert len(engine.calls) == 1


class FailingGiveBack(UpdateRecorder):
    def run(self, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:  # type: ignore[override]
        self.calls.append(args)
        if "--memory" in args:  # the share given back, not the lift
            raise EngineError([self.binary, *args], 125, "Error: container is stopped")
        return subprocess.CompletedProcess(args, 0, "", "")


def test_a_share_not_given_back_is_said_with_the_fix() -> None:
    notes: list[tuple[str, str]] = []
    with nodes_mod.heads_uncapped(FailingGiveBack(), SPEC, ["head-001"], lambda n, m: notes.append((n, m))):
        pass
    ((node, message),) = notes
    assert node == "head-001" and message.startswith("share 0.25 CPU, 1024 MiB not given back"), message
    assert "Error: container is stopped" in message and "`invoke down` and `up`" in message


def test_the_converge_benchmark_lowers_the_floor_for_its_own_process_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """benchmarks/converge_scale.py --min-share: 8 compute nodes on 2 cores (the issue's 1, 2, 4, 8)
    are refused by the floor a node certifies with; the benchmark only configures, so it lowers the
    floor, and the quotas still add up to what the head and the workstation leave."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "converge_scale.py"
    spec = importlib.util.spec_from_file_location("converge_scale", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    with pytest.raises(ShareError, match="Use at most 7 compute node"):
        node_shares(with_nodes(8), machine=TWO_CORES)
    monkeypatch.setattr(share_mod, "load_hardware", share_mod.load_hardware)  # restored after the test
    bench.lower_share_floor(0.15)
    shares = node_shares(with_nodes(8), machine=TWO_CORES)
    compute = [s.cpus for name, s in shares.items() if name.startswith("node-")]
    assert len(compute) == 8 and min(compute) >= 0.15
    assert sum(compute) <= TWO_CORES.cpus - RULES.head_cpus - RULES.workstation_cpus
    assert load_hardware()["local"].share == RULES  # the catalogue itself is untouched
