"""NODE.json loading and validation (stdlib only): defaults, overrides, actionable errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES, gpu_config, load_example

from validators.config import ConfigError, load_config, parse_config


@pytest.mark.parametrize("name", ["cpu-node.json", "p5-node.json"])
@pytest.mark.parametrize("profile", ["quick", "standard", "full"])
def test_examples_load_in_every_profile(name: str, profile: str) -> None:
    cfg = load_config(str(EXAMPLES / name), profile)
    assert cfg.node and cfg.instance_type
    assert cfg.duration("workload_timeout_seconds") > 0


def test_profile_defaults_and_overrides() -> None:
    data = gpu_config()
    quick, full = parse_config(data, "quick"), parse_config(data, "full")
    assert quick.duration("burnin_seconds") == full.duration("burnin_seconds") == 300  # set in the example
    assert quick.duration("checkpoint_steps") == 6 and full.duration("checkpoint_steps") == 20  # defaults
    assert quick.thresholds["matmul.median_gap_pct"] == 7
    assert quick.thresholds["matmul.cpu_median_gap_pct"] == 50  # default kept beside the override
    cpu = parse_config(load_example("cpu-node.json"), "quick")
    assert cpu.has_gpu is False and cpu.gpu_count == 0 and cpu.shared_storage_require_mount


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"schema_version": 2}, "schema_version: got 2, this suite reads 1"),
        ({"node": ""}, "node: got ''; must be a non-empty string"),
        ({"gpu": {"count": 8}}, "gpu.model: required when gpu.count > 0"),
        ({"gpu": {"count": -1, "model": "H100"}}, "gpu.count: got -1; must be an integer >= 0"),
        ({"gpus": {}}, "gpus: unknown key; did you mean 'gpu'?"),
        ({"sizes": {"gloo_byte": 1}}, "sizes.gloo_byte: unknown key; did you mean sizes.'gloo_bytes'?"),
        (
            {"sizes": {"gloo_sweep_byte": [1]}},
            "sizes.gloo_sweep_byte: unknown key; did you mean sizes.'gloo_sweep_bytes'?",
        ),
        (
            {"sizes": {"gloo_sweep_bytes": 1048576}},
            "sizes.gloo_sweep_bytes: got 1048576; must be a list of message sizes in bytes, e.g. [",
        ),
        (
            {"sizes": {"gloo_sweep_bytes": [1048576, "4M"]}},
            "sizes.gloo_sweep_bytes[1]: got '4M'; every entry must be an integer > 0 (bytes)",
        ),
        ({"sizes": {"gloo_sweep_bytes": [0]}}, "sizes.gloo_sweep_bytes[0]: got 0; every entry must be"),
        ({"sizes": {"gloo_sweep_bytes": [True]}}, "sizes.gloo_sweep_bytes[0]: got True; every entry must be"),
        (
            {"durations": {"burnin_seconds": "1m"}},
            "durations.burnin_seconds: got '1m'; must be a number >= 0",
        ),
        ({"software": {"nccl": ""}}, "software.nccl: got ''; must be a version string"),
        ({"peers": [{"name": "gpu-001", "address": "10.0.0.1"}]}, "peers[0].name: 'gpu-001' is this node"),
        ({"nccl": {"collectives": ["allreduce"]}}, "nccl.collectives: 'allreduce' is not one of"),
        (
            {"nccl": {"multi_node_collectives": ["all_to_all"]}},
            "nccl.multi_node_collectives: ['all_to_all']: a non-empty list of all_reduce, all_gather",
        ),
        ({"nccl": {"multi_node_collectives": []}}, "nccl.multi_node_collectives: []: a non-empty list of"),
        (
            {"nccl": {"multi_node_collectives": ["alltoall", "alltoall"]}},
            "nccl.multi_node_collectives: ['alltoall', 'alltoall'] names a collective twice",
        ),
        ({"limits": {"memlock_kib": "lots"}}, "limits.memlock_kib: got 'lots'"),
    ],
)
def test_errors_name_the_key_the_value_and_the_fix(change: dict, message: str) -> None:
    data = gpu_config()
    data.update(change)
    with pytest.raises(ConfigError) as exc:
        parse_config(data, "quick", source="NODE.json")
    assert message in str(exc.value)
    assert str(exc.value).startswith("NODE.json: ")


def test_the_gloo_sweep_defaults_per_profile_and_is_overridden_whole() -> None:
    data = load_example("cpu-node.json")
    quick, full = parse_config(data, "quick"), parse_config(data, "full")
    mib = 1 << 20
    assert quick.sweep("gloo_sweep_bytes") == [mib, 4 * mib, 16 * mib, 64 * mib]
    assert full.sweep("gloo_sweep_bytes")[-1] == 256 * mib
    data["sizes"] = {"gloo_sweep_bytes": [4096, 8192], "gloo_bytes": 8192}
    cfg = parse_config(data, "quick")
    assert cfg.sweep("gloo_sweep_bytes") == [4096, 8192] and cfg.size("gloo_bytes") == 8192
    assert "gloo_sweep_bytes" not in cfg.sizes  # sizes stay numbers; the list lives in sweeps
    data["sizes"] = {"gloo_sweep_bytes": []}
    assert parse_config(data, "quick").sweep("gloo_sweep_bytes") == []  # no sweep: the judged size alone


def test_unreadable_and_invalid_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1,,}')
    with pytest.raises(ConfigError, match=r"bad.json:1:\d+: not valid JSON"):
        load_config(str(bad), "quick")
    bad.write_text(json.dumps([1]))
    with pytest.raises(ConfigError, match="top level must be a JSON object"):
        load_config(str(bad), "quick")


def test_multi_node_collectives_default_to_all_reduce() -> None:
    assert parse_config(gpu_config(), "full").nccl_multi_node_collectives == ["all_reduce"]
    data = gpu_config()
    data["nccl"]["multi_node_collectives"] = ["all_reduce", "alltoall"]
    assert parse_config(data, "quick").nccl_multi_node_collectives == ["all_reduce", "alltoall"]


def test_a_groups_member_list_gives_the_peers(tmp_path: Path) -> None:
    node = tmp_path / "node.json"
    node.write_text(json.dumps(load_example("cpu-node.json")))
    name = load_example("cpu-node.json")["node"]
    members = tmp_path / "members.json"
    members.write_text(
        json.dumps([{"name": "b-peer", "address": "10.0.0.2"}, {"name": name, "address": "10.0.0.1"}])
    )
    cfg = load_config(str(node), "quick", peers_file=str(members))
    assert [(p.name, p.address) for p in cfg.peers] == [("b-peer", "10.0.0.2")]  # this node left out
    members.write_text(json.dumps([{"name": "b-peer", "address": "10.0.0.2"}]))
    with pytest.raises(ConfigError, match=rf"members.json: '{name}' is not a member of this group"):
        load_config(str(node), "quick", peers_file=str(members))
    members.write_text(json.dumps([{"name": name, "address": "10.0.0.1"}, {"name": "c"}]))
    with pytest.raises(ConfigError, match=r"members.json: \[1\].address"):
        load_config(str(node), "quick", peers_file=str(members))
