"""GPU preflight checks fed captured nvidia-smi output (tests/data/nvidia-smi, see SOURCES.md there)."""

from __future__ import annotations

from conftest import NVSMI_NO_DRIVER_RC, FakeRunner, captured, gpu_config, make_context, nvsmi_no_driver_text

from validators.checks.gpu import GpuHealth, GpuInventory, GpuThrottle, PcieLink, bad_throttle
from validators.suite import run_check

NVSMI = ("nvidia-smi", "-q", "-x")


def one_gpu(model: str) -> dict:
    return gpu_config(gpu={"count": 1, "model": model, "nvlink_links_per_gpu": 0, "nvswitch": False})


def test_driver_not_loaded_fails_every_nvidia_smi_check_with_its_own_words() -> None:
    runner = FakeRunner({NVSMI: (NVSMI_NO_DRIVER_RC, nvsmi_no_driver_text(), "")})
    ctx = make_context(gpu_config(), runner)
    for check in (GpuInventory(), GpuHealth(), PcieLink(), GpuThrottle()):
        result = run_check(check, ctx)
        assert result.status == "fail", check.id
        assert "couldn't communicate with the NVIDIA driver" in result.summary
        assert result.summary.startswith("nvidia-smi failed (rc 9)")
    assert runner.calls.count(list(NVSMI)) == 1  # cached within one suite run


def test_nvidia_smi_missing_is_a_clear_failure() -> None:
    ctx = make_context(gpu_config(), FakeRunner({}))
    result = run_check(GpuInventory(), ctx)
    assert result.status == "fail"
    assert result.summary.startswith("nvidia-smi not found")


def test_pending_row_remap_fails_gpu_health() -> None:
    text = captured("nvidia-smi", "q_510_a100_remap_pending_excerpt.txt")
    ctx = make_context(one_gpu("A100"), FakeRunner({NVSMI: (0, text, "")}))
    result = run_check(GpuHealth(), ctx)
    assert result.status == "fail"
    assert "row remap pending" in result.summary


def test_pcie_width_below_max_fails() -> None:
    text = captured("nvidia-smi", "q_550_rtx4060ti_width_x4_first_gpu.txt")
    ctx = make_context(one_gpu("RTX"), FakeRunner({NVSMI: (0, text, "")}))
    result = run_check(PcieLink(), ctx)
    assert result.status == "fail"
    assert "PCIe link width x4 below max x8" in result.summary


def test_pcie_gen_below_max_is_reread_under_load_and_fails_when_still_low() -> None:
    text = captured("nvidia-smi", "q_550_a10_pcie_gen1.txt")
    runner = FakeRunner({NVSMI: (0, text, "")})
    ctx = make_context(one_gpu("A10"), runner)
    runner.answers[(ctx.python, ctx.workload("pcie_load.py"))] = (0, text, "")
    result = run_check(PcieLink(), ctx)
    assert result.status == "fail"
    assert "PCIe link gen Gen1 below max Gen4 under load" in result.summary
    assert any("pcie_load.py" in " ".join(call) for call in runner.calls)


def test_gpu_inventory_counts_and_names_gpus() -> None:
    text = captured("nvidia-smi", "q_550_a10_pcie_gen1.txt")
    ok = run_check(GpuInventory(), make_context(one_gpu("A10"), FakeRunner({NVSMI: (0, text, "")})))
    assert ok.status == "pass", ok.summary
    wrong = run_check(GpuInventory(), make_context(gpu_config(), FakeRunner({NVSMI: (0, text, "")})))
    assert wrong.status == "fail"
    assert "found 1 GPU(s), NODE.json expects 8" in wrong.summary


def test_throttle_reasons_hardware_and_thermal_are_faults() -> None:
    assert bad_throttle(["Idle", "SW Power Cap", "HW Slowdown", "SW Thermal Slowdown"]) == [
        "HW Slowdown",
        "SW Thermal Slowdown",
    ]
    assert bad_throttle(["clocks_event_reason_hw_power_brake_slowdown"]) == [
        "clocks_event_reason_hw_power_brake_slowdown"
    ]
    text = captured("nvidia-smi", "q_550_a10_pcie_gen1.txt")
    result = run_check(GpuThrottle(), make_context(one_gpu("A10"), FakeRunner({NVSMI: (0, text, "")})))
    assert result.status == "pass", result.summary  # the capture's only active reason is Idle
    assert "active reasons Idle" in result.evidence["lines"][0]


def test_persistence_off_fails_and_a_healthy_gpu_passes() -> None:
    healthy = captured("nvidia-smi", "q_550_a10_pcie_gen1.txt")
    result = run_check(GpuHealth(), make_context(one_gpu("A10"), FakeRunner({NVSMI: (0, healthy, "")})))
    assert result.status == "pass", result.summary
    off = captured("nvidia-smi", "qx_535_a100_mig.xml")
    result = run_check(GpuHealth(), make_context(one_gpu("A100"), FakeRunner({NVSMI: (0, off, "")})))
    assert result.status == "fail"
    assert "persistence mode is off" in result.summary


def test_a_lost_gpu_beside_readable_ones_fails_inventory_with_nvidia_smi_words() -> None:
    # Composed, not captured: nvidia-smi prints this line for a GPU it cannot open while it still
    # reports the others (the parser's 'failures'); here it precedes a real one-GPU capture.
    lost = "Unable to determine the device handle for GPU0000:9A:00.0: Unknown Error\n"
    text = lost + captured("nvidia-smi", "q_550_a10_pcie_gen1.txt")
    result = run_check(GpuInventory(), make_context(one_gpu("A10"), FakeRunner({NVSMI: (0, text, "")})))
    assert result.status == "fail"
    assert "nvidia-smi: Unable to determine the device handle for GPU0000:9A:00.0" in result.summary


def test_gpu_inventory_names_each_gpus_uuid_and_serial_for_the_replaced_node_record() -> None:
    from clusterforge.node.report_model import CheckResult
    from clusterforge.rollout.identity import gpu_ids

    text = captured("nvidia-smi", "q_545_h100_sxm_healthy.txt")
    result = run_check(GpuInventory(), make_context(one_gpu("H100"), FakeRunner({NVSMI: (0, text, "")})))
    assert result.status == "pass", result.summary
    assert gpu_ids([CheckResult.model_validate(result.to_json())]) == [
        "GPU-10f35015-e921-bfab-2eb8-4e9b6664d5f1",
        "serial 1654123038646",
    ]


def test_gpu_inventory_leaves_out_a_serial_the_board_does_not_have() -> None:
    text = captured("nvidia-smi", "q_470_gtx680.txt")
    result = run_check(GpuInventory(), make_context(one_gpu("GTX"), FakeRunner({NVSMI: (0, text, "")})))
    lines = " ".join(result.to_json()["evidence"]["lines"])
    assert "uuid GPU-" in lines and "serial" not in lines  # "Serial Number : N/A" on GeForce
