"""infiniband-ports and nvlink on captured outputs (tests/data/ibstat, ibstatus, nvlink) through the
injected command runner; NODE.json infiniband keys."""

from __future__ import annotations

import re

import pytest
from conftest import FakeRunner, captured, gpu_config, make_context

from validators.checks.fabric import InfinibandPorts, NvLink
from validators.config import ConfigError
from validators.suite import run_check

A100_IB = captured("ibstat", "gpud_a100_8ports_ibpanic_exit255.txt")  # mlx5_0..7 Active at 200, mlx5_8 gone


def ib_config(**infiniband: object) -> dict:
    cfg = gpu_config()
    cfg["infiniband"] = infiniband
    return cfg


def ib_run(cfg: dict, answers: dict) -> object:
    return run_check(InfinibandPorts(), make_context(cfg, FakeRunner(answers)))


def test_skipped_with_the_reason_where_no_infiniband_is_expected() -> None:
    result = run_check(InfinibandPorts(), make_context(gpu_config(), FakeRunner({})))
    assert result.status == "skip" and "expects no InfiniBand port" in result.summary


def test_every_expected_port_active_at_the_rate() -> None:
    cfg = ib_config(ports=[f"mlx5_{i}" for i in range(8)], rate_gbps=200, link_layer="InfiniBand")
    result = ib_run(cfg, {("ibstat",): (255, A100_IB, "")})
    assert result.status == "pass", result.summary
    assert result.summary == "8 InfiniBand port(s) Active / LinkUp at 200 Gb/s"
    assert result.metrics["ports_up"]["value"] == 8


def test_a_port_that_vanished_fails_with_ibstats_own_words() -> None:
    cfg = ib_config(ports=[f"mlx5_{i}" for i in range(9)], rate_gbps=200)
    result = ib_run(cfg, {("ibstat",): (255, A100_IB, "")})
    assert result.status == "fail"
    assert "mlx5_8:1 not listed (ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed" in result.summary


def test_a_slower_rate_is_a_degraded_link() -> None:
    result = ib_run(ib_config(count=8, rate_gbps=400), {("ibstat",): (0, A100_IB, "")})
    assert result.status == "fail"
    assert "mlx5_0:1 runs at 200.0 Gb/s, expected 400 (a degraded link)" in result.summary


def test_down_ports_and_the_wrong_link_layer_fail() -> None:
    down = captured("ibstat", "cx6_2ports_ethernet_down_disabled_annotated.txt")
    result = ib_run(ib_config(count=2, rate_gbps=200), {("ibstat",): (0, down, "")})
    assert result.status == "fail"
    assert "mlx5_0:1 is Down / Disabled, expected Active / LinkUp" in result.summary
    roce = captured("ibstatus", "edr_ethernet_one_down_one_active.txt")
    result = ib_run(
        ib_config(ports=["mlx5_1"], link_layer="InfiniBand"),
        {("ibstat",): (127, "", "ibstat: not found"), ("ibstatus",): (0, roce, "")},
    )
    assert (
        result.status == "fail" and "mlx5_1:1 link layer is Ethernet, expected InfiniBand" in result.summary
    )


def test_ibstatus_is_the_fallback_where_ibstat_is_missing() -> None:
    text = captured("ibstatus", "cuml_wiki_4x_edr_infiniband_active.txt")
    runner = {("ibstat",): (127, "", "ibstat: command not found"), ("ibstatus",): (0, text, "")}
    result = ib_run(ib_config(count=4, rate_gbps=100), runner)
    assert result.status == "pass", result.summary
    neither = ib_run(ib_config(count=4), {})
    assert neither.status == "fail"
    assert "ibstat not found" in neither.summary and "ibstatus not found" in neither.summary


@pytest.mark.parametrize(
    ("infiniband", "message"),
    [
        ({"ports": "mlx5_0"}, "infiniband.ports: got 'mlx5_0'; must be a list of HCA ports"),
        ({"rate_gbps": 0}, "infiniband.rate_gbps: got 0; must be a number > 0"),
        ({"link_layer": "ib"}, 'infiniband.link_layer: got \'ib\'; use "InfiniBand" or "Ethernet"'),
        ({"rate": 400}, "infiniband.rate: unknown key; did you mean"),
    ],
)
def test_bad_infiniband_keys_are_refused_with_the_fix(infiniband: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_context(ib_config(**infiniband), FakeRunner({}))


def test_nvlink_check_on_a_bridged_pcie_capture() -> None:
    """Two H100 PCIe with 12 of 18 links up: passes at 12 links per GPU, fails at 18 naming the inactive ones."""
    text = captured("nvlink", "h100_pcie_2gpus_inactive_links_prompt_indented.txt")
    answers = {("nvidia-smi", "nvlink"): (0, text, "")}
    cfg = gpu_config(gpu={"count": 2, "model": "H100", "nvlink_links_per_gpu": 12, "nvswitch": False})
    assert run_check(NvLink(), make_context(cfg, FakeRunner(answers))).status == "pass"
    cfg["gpu"]["nvlink_links_per_gpu"] = 18
    result = run_check(NvLink(), make_context(cfg, FakeRunner(answers)))
    assert result.status == "fail"
    assert "GPU 0: 12 NVLink links up, expected 18 (inactive: [4, 5, 10, 11, 16, 17])" in result.summary
