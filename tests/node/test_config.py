"""NODE.json rendering from spec + catalogue, checked by the validators' own config loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.catalog import load_hardware
from clusterforge.node.config import NodeConfigError, render_node_config
from clusterforge.providers.base import Node
from clusterforge.spec.loader import SpecError, load_spec
from validators.config import parse_config

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def node(name: str, pool: str, instance_type: str, address: str) -> Node:
    return Node(name, address, pool, "gpu", instance_type, {"ansible_connection": "local"})


def test_local_node_config_is_accepted_by_the_validators() -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    n1, n2 = (
        node("node-001", "node", "local", "10.89.42.11"),
        node("node-002", "node", "local", "10.89.42.12"),
    )
    config = render_node_config(spec, n1, [n1, n2], launcher=["srun", "-N", "{nnodes}"])
    parsed = parse_config(config, "quick")
    assert parsed.node == "node-001" and parsed.instance_type == "local" and not parsed.has_gpu
    assert [p.name for p in parsed.peers] == ["node-002"]  # never itself
    assert parsed.software["slurm"] == spec.software.slurm
    assert parsed.software == {"slurm": spec.software.slurm}  # no GPU: no driver, CUDA or NCCL pin
    assert parsed.shared_storage_path == "/shared"
    # durations from the spec's profile, not the suite's defaults
    assert parsed.duration("burnin_seconds") == spec.certification.profiles["local"].durations.burnin_seconds
    # the catalogue's floor for the local type, with the size it holds at
    local = load_hardware()["local"]
    key = local.thresholds.nccl[0].key
    assert parsed.threshold(key) == local.thresholds.nccl[0].busbw_gbps_min
    assert (
        parsed.threshold(key.replace("busbw_gbps", "message_bytes")) == local.thresholds.nccl[0].message_bytes
    )


def test_gpu_node_carries_gpu_efa_and_pins() -> None:
    spec, _ = load_spec(STACKS / "prod.yaml")
    n = node("gpu-001", "gpu", "p5.48xlarge", "10.0.0.5")
    parsed = parse_config(render_node_config(spec, n), "standard")
    p5 = load_hardware()["p5.48xlarge"]
    assert parsed.gpu_count == p5.gpu.count and parsed.gpu_model == p5.gpu.model
    assert parsed.nvswitch and parsed.efa_interfaces == p5.network.efa_interfaces
    assert parsed.software["driver"] == spec.software.driver.version
    assert parsed.software["fabric_manager"] == spec.software.fabric_manager
    assert parsed.memlock_kib == "unlimited"


def test_profile_overrides_win_over_catalogue(tmp_path: Path) -> None:
    text = (
        (STACKS / "local.yaml")
        .read_text()
        .replace(
            "durations: {burnin_seconds: 10, nccl_iterations: 5, checkpoint_steps: 6}",
            "durations: {burnin_seconds: 10, nccl_iterations: 5, checkpoint_steps: 6}\n"
            "      thresholds: {matmul.cpu_gflops_min: 123.0}\n      skip_checks: [checkpoint-restart]",
        )
    )
    path = tmp_path / "local.yaml"
    path.write_text(text)
    spec, _ = load_spec(path)
    config = render_node_config(spec, node("node-001", "node", "local", "10.0.0.1"))
    assert config["thresholds"]["matmul.cpu_gflops_min"] == 123.0
    assert config["skip_checks"] == ["checkpoint-restart"]


def test_components_limit_the_pins() -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    config = render_node_config(spec, node("node-001", "node", "local", "10.0.0.1"), components=["slurm"])
    assert config["software"] == {"slurm": spec.software.slurm}


def test_unknown_profile_and_type_are_clear_errors() -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    with pytest.raises(NodeConfigError, match="'nope' is not in certification.profiles .known: local"):
        render_node_config(spec, node("node-001", "node", "local", "10.0.0.1"), profile="nope")
    with pytest.raises(NodeConfigError, match="'x9.huge' is not in the hardware catalogue"):
        render_node_config(spec, node("node-001", "node", "x9.huge", "10.0.0.1"))


def test_checkpoint_size_defaults_by_type_and_follows_the_profile(tmp_path: Path) -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    local = parse_config(render_node_config(spec, node("node-001", "node", "local", "10.89.42.11")), "quick")
    assert local.size("checkpoint_bytes") == 256 << 20  # container nodes: at least 256 MiB
    # the catalogue's ratio floors reach the node
    hw = load_hardware()
    for key in ("checkpoint.write_ratio_min", "checkpoint.read_ratio_min"):
        assert local.threshold(key) == hw.common_thresholds.values[key]
    prod, _ = load_spec(STACKS / "prod.yaml")
    p5 = parse_config(render_node_config(prod, node("gpu-001", "gpu", "p5.48xlarge", "10.0.0.5")), "standard")
    assert p5.size("checkpoint_bytes") == (hw["p5.48xlarge"].gpu.memory_mib // 16) << 20  # from GPU memory
    text = (
        (STACKS / "local.yaml")
        .read_text()
        .replace("durations: {burnin_seconds: 10", "checkpoint_mib: 64\n      durations: {burnin_seconds: 10")
    )
    (tmp_path / "local.yaml").write_text(text)
    spec, _ = load_spec(tmp_path / "local.yaml")
    cfg = parse_config(render_node_config(spec, node("node-001", "node", "local", "10.89.42.11")), "quick")
    assert cfg.size("checkpoint_bytes") == 64 << 20


def test_the_gloo_sweep_follows_the_profile_else_the_suite_default(tmp_path: Path) -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    rendered = render_node_config(spec, node("node-001", "node", "local", "10.89.42.11"))
    assert "gloo_sweep_bytes" not in rendered["sizes"]  # the validators profile's sweep applies
    assert parse_config(rendered, "quick").sweep("gloo_sweep_bytes") == [1 << 20, 4 << 20, 16 << 20, 64 << 20]
    text = (
        (STACKS / "local.yaml")
        .read_text()
        .replace(
            "durations: {burnin_seconds: 10", "gloo_sweep_mib: [1, 2]\n      durations: {burnin_seconds: 10"
        )
    )
    (tmp_path / "local.yaml").write_text(text)
    spec, _ = load_spec(tmp_path / "local.yaml")
    cfg = parse_config(render_node_config(spec, node("node-001", "node", "local", "10.89.42.11")), "quick")
    assert cfg.sweep("gloo_sweep_bytes") == [1 << 20, 2 << 20]
    (tmp_path / "bad.yaml").write_text(text.replace("gloo_sweep_mib: [1, 2]", "gloo_sweep_mib: [1, 0]"))
    with pytest.raises(SpecError) as exc:
        load_spec(tmp_path / "bad.yaml")
    assert any("gloo_sweep_mib" in f.path for f in exc.value.findings), str(exc.value)


def test_gpu_nodes_get_the_multi_node_collectives_of_their_profile(tmp_path: Path) -> None:
    spec, _ = load_spec(STACKS / "prod.yaml")  # suite standard
    n = node("gpu-001", "gpu", "p5.48xlarge", "10.0.0.5")
    config = render_node_config(spec, n)
    assert config["nccl"] == {"multi_node_collectives": ["all_reduce", "all_gather", "alltoall"]}
    assert parse_config(config, "standard").nccl_multi_node_collectives == [
        "all_reduce",
        "all_gather",
        "alltoall",
    ]
    quick = spec.certification.profiles["production"].model_copy(update={"suite": "quick"})
    spec_quick = spec.model_copy(
        update={"certification": spec.certification.model_copy(update={"profiles": {"production": quick}})}
    )
    assert render_node_config(spec_quick, n)["nccl"]["multi_node_collectives"] == ["all_reduce"]
    launched = render_node_config(spec, n, launcher=["srun"])["nccl"]
    assert launched["launcher"] == ["srun"] and launched["multi_node_collectives"][0] == "all_reduce"
    # the profile's own list wins; CPU nodes carry none (gloo measures their network)
    text = (
        (STACKS / "prod.yaml")
        .read_text()
        .replace(
            "      suite: standard\n",
            "      suite: standard\n      multi_node_collectives: [alltoall, all_reduce]\n",
        )
    )
    (tmp_path / "prod.yaml").write_text(text)
    spec2, _ = load_spec(tmp_path / "prod.yaml")
    assert render_node_config(spec2, n)["nccl"]["multi_node_collectives"] == ["alltoall", "all_reduce"]
    local, _ = load_spec(STACKS / "local.yaml")
    assert "nccl" not in render_node_config(local, node("node-001", "node", "local", "10.0.0.1"))


def test_a_profile_naming_a_collective_twice_is_refused(tmp_path: Path) -> None:
    text = (
        (STACKS / "prod.yaml")
        .read_text()
        .replace(
            "      suite: standard\n",
            "      suite: standard\n      multi_node_collectives: [alltoall, alltoall]\n",
        )
    )
    (tmp_path / "prod.yaml").write_text(text)
    with pytest.raises(SpecError, match="names a collective twice"):
        load_spec(tmp_path / "prod.yaml")


def test_a_gpu_group_members_node_json_lets_nccl_multi_node_start_its_ranks() -> None:
    # Before, the network stage rendered no nccl.launcher, and nccl-multi-node refuses peers without
    # one: every GPU group job would have failed "lists peers but no nccl.launcher".
    from clusterforge.certify.network.runner import group_node_config
    from validators.checks.nccl import launcher_argv

    spec, _ = load_spec(STACKS / "prod.yaml")
    a, b = (
        node("gpu-001", "gpu", "p5.48xlarge", "10.0.0.5"),
        node("gpu-002", "gpu", "p5.48xlarge", "10.0.0.6"),
    )
    parsed = parse_config(group_node_config(spec, a, [b], one_launcher=True), "standard")
    argv = launcher_argv(parsed, parsed.peers)
    assert argv == ["srun", "--nodes=2", "--ntasks-per-node=8", "--mpi=pmix"]
    # gloo groups (CPU nodes): the job's srun starts one validators process per node, no launcher.
    local, _ = load_spec(STACKS / "local.yaml")
    c, d = node("node-001", "node", "local", "10.89.42.11"), node("node-002", "node", "local", "10.89.42.12")
    assert "launcher" not in group_node_config(local, c, [d], one_launcher=False).get("nccl", {})
