"""nvidia-smi -q / -q -x parser on captured outputs (tests/data/nvidia-smi, sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validators.parsers.nvidia_smi import parse_nvidia_smi

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi"
CAPTURES = sorted(p for p in DATA.iterdir() if p.suffix in (".txt", ".xml"))
GPU_FIELDS = (
    "bus_id",
    "name",
    "persistence_mode",
    "ecc_uncorrected_volatile",
    "ecc_corrected_volatile",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "retired_pages_pending",
    "pcie_gen_current",
    "pcie_gen_max",
    "pcie_width_current",
    "pcie_width_max",
    "throttle_active",
)


def parse(name: str) -> dict:
    return parse_nvidia_smi((DATA / name).read_text())


def test_every_capture_is_listed_in_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    for path in CAPTURES:
        assert f"`{path.name}`" in sources


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_properties_hold_on_every_capture(path: Path) -> None:
    result = parse_nvidia_smi(path.read_text())
    json.dumps(result)
    assert set(result) >= {"driver_version", "cuda_version", "gpus", "error"}
    assert (result["error"] is None) == bool(result["gpus"])
    for gpu in result["gpus"]:
        assert set(gpu) >= set(GPU_FIELDS)
        assert gpu["bus_id"]  # the name too, unless a display filter (-d) left it out
        assert gpu["name"] or "-d " in path.read_text()[:200]
        if gpu["pcie_gen_current"] is not None and gpu["pcie_gen_max"] is not None:
            assert 1 <= gpu["pcie_gen_current"] <= gpu["pcie_gen_max"] <= 6


def test_470_driver_old_layout_reads_as_unknowns() -> None:
    result = parse("q_470_gtx680.txt")
    assert result["driver_version"] == "470.256.02" and result["cuda_version"] == "11.4"
    (gpu,) = result["gpus"]
    assert gpu["bus_id"] == "00000000:08:00.0" and gpu["name"] == "NVIDIA GeForce GTX 680"
    assert gpu["persistence_mode"] is False
    # Remapped Rows : N/A, Clocks Throttle Reasons : N/A, ECC and PCIe all N/A
    assert gpu["remapped_rows_pending"] is None and gpu["throttle_active"] is None
    assert gpu["ecc_uncorrected_volatile"] is None and gpu["pcie_gen_max"] is None


def test_pending_row_remap() -> None:
    result = parse("q_510_a100_remap_pending_excerpt.txt")
    assert result["driver_version"] == "510.73.08" and result["attached_gpus"] == 8
    (gpu,) = result["gpus"]
    assert gpu["remapped_rows_pending"] is True
    assert gpu["remapped_rows_failure"] is False
    assert gpu["ecc_corrected_volatile"] == 177 and gpu["ecc_uncorrected_volatile"] == 0
    assert gpu["retired_pages_pending"] is None  # "Pending Page Blacklist : N/A" on A100


def test_pcie_generation_below_max() -> None:
    (gpu,) = parse("q_550_a10_pcie_gen1.txt")["gpus"]
    assert (gpu["pcie_gen_current"], gpu["pcie_gen_max"]) == (1, 4)
    assert (gpu["pcie_width_current"], gpu["pcie_width_max"]) == (16, 16)
    assert gpu["persistence_mode"] is True
    assert gpu["throttle_active"] == ["Idle"]
    assert gpu["remapped_rows_pending"] is False and gpu["ecc_uncorrected_volatile"] == 0


def test_pcie_width_below_max() -> None:
    result = parse("q_550_rtx4060ti_width_x4_first_gpu.txt")
    assert result["attached_gpus"] == 2 and len(result["gpus"]) == 1
    gpu = result["gpus"][0]
    assert (gpu["pcie_width_current"], gpu["pcie_width_max"]) == (4, 8)
    assert gpu["ecc_uncorrected_volatile"] is None  # GeForce: ECC N/A


def test_xml_535_with_mig() -> None:
    result = parse("qx_535_a100_mig.xml")
    assert result["format"] == "xml" and result["driver_version"] == "535.54.03"
    (gpu,) = result["gpus"]
    assert gpu["bus_id"] == "00000000:01:00.0" and gpu["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpu["serial"] == "1650522003820"
    assert gpu["throttle_active"] == []
    assert gpu["remapped_rows_pending"] is None  # <remapped_rows>N/A</remapped_rows>
    assert (gpu["pcie_gen_current"], gpu["pcie_width_max"]) == (4, 16)
    assert gpu["ecc_uncorrected_volatile"] == 0


def test_driver_failure_is_reported() -> None:
    result = parse("driver_not_loaded.txt")
    assert result["gpus"] == []
    assert result["error"].startswith("NVIDIA-SMI has failed because it couldn't communicate")


# ---- edge handling (inputs built here, not captures) ----


def test_xml_throttle_reasons_and_remap_pending_old_tags() -> None:
    xml = (
        "<nvidia_smi_log><driver_version>525.85.12</driver_version><cuda_version>12.0</cuda_version>"
        '<gpu id="00000000:10:1C.0"><product_name>NVIDIA A100-SXM4-40GB</product_name>'
        "<persistence_mode>Enabled</persistence_mode>"
        "<clocks_throttle_reasons><clocks_throttle_reason_gpu_idle>Not Active</clocks_throttle_reason_gpu_idle>"
        "<clocks_throttle_reason_hw_slowdown>Active</clocks_throttle_reason_hw_slowdown>"
        "<clocks_throttle_reason_hw_thermal_slowdown>Active</clocks_throttle_reason_hw_thermal_slowdown>"
        "</clocks_throttle_reasons>"
        "<ecc_errors><volatile><sram_uncorrectable>1</sram_uncorrectable><dram_uncorrectable>2</dram_uncorrectable>"
        "<sram_correctable>0</sram_correctable><dram_correctable>5</dram_correctable></volatile></ecc_errors>"
        "<remapped_rows><remapped_row_pending>Yes</remapped_row_pending>"
        "<remapped_row_failure>No</remapped_row_failure></remapped_rows></gpu></nvidia_smi_log>"
    )
    (gpu,) = parse_nvidia_smi(xml)["gpus"]
    assert gpu["throttle_active"] == ["HW Slowdown", "HW Thermal Slowdown"]
    assert gpu["ecc_uncorrected_volatile"] == 3 and gpu["ecc_corrected_volatile"] == 5
    assert gpu["remapped_rows_pending"] is True and gpu["persistence_mode"] is True


def test_nvml_mismatch_and_garbage() -> None:
    assert parse_nvidia_smi("Failed to initialize NVML: Driver/library version mismatch\n")["error"] == (
        "Failed to initialize NVML: Driver/library version mismatch"
    )
    assert parse_nvidia_smi("<?xml version='1.0'?><nvidia_smi_log>")["error"].startswith("unreadable")
    empty = parse_nvidia_smi("")
    assert empty["gpus"] == [] and empty["error"] == "nvidia-smi printed no GPU section"


def test_healthy_h200() -> None:
    result = parse("q_550_h200_healthy.txt")
    assert (result["driver_version"], result["cuda_version"]) == ("550.90.12", "12.4")
    (gpu,) = result["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["bus_id"] == "00000000:03:00.0"
    assert gpu["persistence_mode"] is True
    assert (gpu["ecc_uncorrected_volatile"], gpu["ecc_corrected_volatile"]) == (0, 0)
    assert (gpu["remapped_rows_pending"], gpu["remapped_rows_failure"]) == (False, False)
    assert (
        gpu["pcie_gen_current"],
        gpu["pcie_gen_max"],
        gpu["pcie_width_current"],
        gpu["pcie_width_max"],
    ) == (5, 5, 16, 16)
    assert gpu["throttle_active"] == ["Idle"]


# ---- captures added in the second pass (sources in SOURCES.md) ----


def test_driver_580_wide_key_layout() -> None:
    result = parse("q_580_rtx3090ti_wide_keys.txt")
    assert result["driver_version"] == "580.142" and result["cuda_version"] == "13.0"
    (gpu,) = result["gpus"]
    assert gpu["bus_id"] == "00000000:05:00.0" and gpu["name"] == "NVIDIA GeForce RTX 3090 Ti"
    assert gpu["persistence_mode"] is False
    assert gpu["ecc_uncorrected_volatile"] is None and gpu["ecc_corrected_volatile"] is None  # ECC off: N/A
    assert gpu["remapped_rows_pending"] is False and gpu["remapped_rows_failure"] is False
    assert (gpu["pcie_gen_current"], gpu["pcie_gen_max"]) == (1, 4)
    assert (gpu["pcie_width_current"], gpu["pcie_width_max"]) == (16, 16)
    assert gpu["throttle_active"] == ["Idle"]


def test_driver_418_retired_pages_pending_and_narrow_link() -> None:
    result = parse("q_418_v100_power9_width_x2_excerpt.txt")
    assert result["driver_version"] == "418.67" and result["attached_gpus"] == 4
    (gpu,) = result["gpus"]  # the page elides GPUs 2-4
    assert gpu["bus_id"] == "00000004:04:00.0" and gpu["name"] == "Tesla V100-SXM2-32GB"
    assert gpu["retired_pages_pending"] is False  # "Pending : No" under Retired Pages
    assert gpu["remapped_rows_pending"] is None  # no Remapped Rows section before Ampere
    assert gpu["ecc_uncorrected_volatile"] == 0 and gpu["ecc_corrected_volatile"] == 0
    assert (gpu["pcie_width_current"], gpu["pcie_width_max"]) == (2, 16)
    assert (gpu["pcie_gen_current"], gpu["pcie_gen_max"]) == (3, 3)
    assert gpu["throttle_active"] == ["Idle"]


def test_driver_545_h100() -> None:
    result = parse("q_545_h100_sxm_healthy.txt")
    assert result["driver_version"] == "545.23.08" and result["cuda_version"] == "12.3"
    (gpu,) = result["gpus"]
    assert gpu["uuid"] == "GPU-10f35015-e921-bfab-2eb8-4e9b6664d5f1" and gpu["persistence_mode"] is True
    assert gpu["serial"] == "1654123038646"  # not the nested "Chassis Serial Number"
    assert gpu["ecc_uncorrected_volatile"] == 0 and gpu["remapped_rows_pending"] is False
    assert gpu["retired_pages_pending"] is None
    assert (gpu["pcie_gen_current"], gpu["pcie_width_current"]) == (5, 16)
    assert result["error"] is None


def test_unreachable_gpu_line_before_the_output_is_kept() -> None:
    """Derived: nvidia-smi's message for a GPU it cannot reach (wording from NVIDIA/k8s-device-plugin and
    user reports) put before two real captures, as nvidia-smi prints it ahead of the GPUs it can read."""
    line = "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n"
    for name in ("q_545_h100_sxm_healthy.txt", "qx_535_a100_mig.xml"):
        result = parse_nvidia_smi(line + (DATA / name).read_text())
        assert len(result["gpus"]) == 1 and result["error"] is None
        assert result["failures"] == [line.strip()]
    assert parse("q_545_h100_sxm_healthy.txt")["failures"] == []


def test_driver_library_mismatch() -> None:
    result = parse("nvml_driver_library_mismatch_570.txt")
    assert (
        result["gpus"] == []
        and result["error"] == "Failed to initialize NVML: Driver/library version mismatch"
    )
    assert result["failures"] == ["Failed to initialize NVML: Driver/library version mismatch"]


def test_display_filtered_output_with_cuda_not_found() -> None:
    result = parse("q_580_d_memory_performance_vgpu_cut.txt")
    assert result["driver_version"] == "580.105.06" and result["cuda_version"] is None  # "Not Found"
    assert result["attached_gpus"] == 4
    (gpu,) = result["gpus"]  # the excerpt stops inside the first GPU
    assert gpu["bus_id"] == "00000000:42:00.0" and gpu["name"] is None  # -d PERFORMANCE prints no name
    assert gpu["throttle_active"] == [] and gpu["pcie_gen_current"] is None
