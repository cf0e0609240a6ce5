"""dcgmi diag parser on captured outputs (tests/data/dcgmi-diag, sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validators.parsers.dcgm import normalise_status, parse_dcgmi_diag

DATA = Path(__file__).resolve().parents[1] / "data" / "dcgmi-diag"
CAPTURES = sorted(p for p in DATA.iterdir() if p.name != "SOURCES.md")
STATUSES = {"pass", "fail", "warn", "skip", "not_run"}


def parse(name: str) -> dict:
    return parse_dcgmi_diag((DATA / name).read_text())


def test_every_capture_is_listed_in_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    for path in CAPTURES:
        assert f"`{path.name}`" in sources


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_properties_hold_on_every_capture(path: Path) -> None:
    result = parse_dcgmi_diag(path.read_text())
    json.dumps(result)
    assert result["tests"] or result["error"], "a capture without test rows must say why"
    for test in result["tests"]:
        assert test["name"] and test["status"] in STATUSES
        assert all(isinstance(k, str) and k.isdigit() and v in STATUSES for k, v in test["gpus"].items())
    assert result["failed"] == [t["name"] for t in result["tests"] if t["status"] == "fail"]
    assert result["ok"] is (bool(result["tests"]) and not result["failed"])


def test_json_3x_with_banner_and_nulls() -> None:
    result = parse("json_3x_dcgm_test_real_output.txt")
    assert result["format"] == "json" and result["version"] == "3.1.0"
    names = [t["name"] for t in result["tests"]]
    assert names[:2] == ["Denylist", "NVML Library"] and names[-1] == "software" and len(names) == 10
    software = result["tests"][-1]
    assert software["category"] == "Custom"
    assert software["gpus"] == {str(i): "pass" for i in range(8)}
    assert result["tests"][0]["gpus"]["7"] == "pass"  # "0,1,2,3,4,5,6,7" split per GPU
    assert result["ok"] is True


def test_json_4x_failure_with_messages() -> None:
    result = parse("json_4x_gb10_software_fail.json")
    assert result["version"] == "4.2.3" and result["driver_version"] == "580.82.09"
    (test,) = result["tests"]
    assert test["name"] == "software" and test["status"] == "fail" and test["gpus"] == {"0": "fail"}
    assert any("Persistence mode for GPU 0 is disabled" in m for m in test["messages"])
    assert result["failed"] == ["software"] and result["ok"] is False


def test_text_4x_per_gpu_rows() -> None:
    result = parse("text_4x_per_gpu_excerpt.txt")
    assert result["version"] == "4.2.3" and result["driver_version"] == "570.148.08"
    (test,) = result["tests"]
    assert test["name"] == "software" and test["gpus"] == {"0": "pass", "1": "pass", "2": "pass", "3": "pass"}


def test_text_3x_gpu_fail_and_wrapped_warning() -> None:
    result = parse("text_3x_gpu_memory_fail_excerpt.txt")
    (test,) = result["tests"]
    assert test["name"] == "GPU Memory" and test["status"] == "fail"
    assert test["gpus"]["0"] == "fail" and test["gpus"]["7"] == "pass" and len(test["gpus"]) == 8
    assert test["messages"] == [
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for GPU 0 Verify "
        "that the cooling on this machine is functional, including external, thermal material interface, fans, "
        "and any other components."
    ]
    assert result["failed"] == ["GPU Memory"]


def test_text_3x_error_row_fails_the_section() -> None:
    result = parse("text_3x_deployment_error_excerpt.txt")
    assert result["failed"] == ["Deployment"]
    assert result["tests"][0]["messages"] == [
        "GPU 3 has uncorrectable memory errors and row remappings are pending"
    ]


def test_text_3x_all_pass() -> None:
    result = parse("text_3x_deployment_pass_excerpt.txt")
    assert len(result["tests"]) == 9 and result["tests"][-1]["name"] == "Inforom"
    assert result["ok"] is True


# ---- edge handling (inputs built here, not captures) ----


def test_status_words() -> None:
    assert [normalise_status(w) for w in ("Pass", "PASS", "Warn", "Skip", "SKIPPED", "Not Run", "Fail")] == [
        "pass",
        "pass",
        "warn",
        "skip",
        "skip",
        "not_run",
        "fail",
    ]
    assert normalise_status("Inconclusive") == "fail"  # unknown words never read as a pass


def test_no_results_is_not_ok() -> None:
    result = parse_dcgmi_diag("Error: Unable to complete diagnostic for group 0. Return: -30 NVVS error\n")
    assert result["tests"] == [] and result["ok"] is False
    assert result["error"].startswith("Error: Unable to complete diagnostic")
    assert parse_dcgmi_diag('{"other": 1}')["error"].startswith("no 'DCGM Diagnostic'")


def test_json_3x_per_gpu_failure_with_warning_objects() -> None:
    """Result shape documented in DCGM nvvs/include/JsonOutput.h (3.x); built here, not captured."""
    doc = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {
                                    "gpu_id": "0",
                                    "status": "Fail",
                                    "warnings": [
                                        {"warning": "Uncorrectable ECC error on GPU 0", "error_id": 52}
                                    ],
                                },
                                {"gpu_id": "1", "status": "Pass"},
                            ],
                        }
                    ],
                }
            ],
            "version": "3.3.5",
        }
    }
    result = parse_dcgmi_diag("Successfully ran diagnostic for group.\n" + json.dumps(doc))
    (test,) = result["tests"]
    assert test["status"] == "fail" and test["gpus"] == {"0": "fail", "1": "pass"}
    assert test["messages"] == ["Uncorrectable ECC error on GPU 0"]
    assert result["failed"] == ["GPU Memory"] and result["version"] == "3.3.5"


# ---- captures added in the second pass (sources in SOURCES.md) ----


def test_3x_pass_all_rows_per_gpu_fail_and_wrapped_messages() -> None:
    result = parse("text_339_r3_a10g_targeted_power_fail.txt")
    assert result["version"] == "3.3.9" and result["driver_version"] == "570.195.03"
    by_name = {t["name"]: t for t in result["tests"]}
    assert len(by_name) == 16 and by_name["PCIe"]["status"] == "pass" and by_name["PCIe"]["gpus"] == {}
    power = by_name["Targeted Power"]
    assert power["status"] == "fail" and power["category"] == "Stress"
    assert power["gpus"] == {"0": "pass", "1": "fail", "2": "pass", "3": "pass"}
    assert power["messages"][0] == (
        "GPU 1 Max power of 224.1 did not reach desired power minimum target_power_min_ratio of 224.2"
        " for GPU 1 Verify that the clock speeds and GPU utilization are high."
    )
    assert power["messages"][1] == "GPU 0 GPU 0 max power: 299.5 W average power usage: 299.0 W"
    assert by_name["EUD Test"]["status"] == "skip" and result["skipped"] == ["EUD Test"]
    assert result["failed"] == ["Targeted Power"] and result["ok"] is False


def test_4x_single_gpu_pass() -> None:
    result = parse("text_442_r2_single_gpu_pass.txt")
    assert [(t["name"], t["category"], t["status"]) for t in result["tests"]] == [
        ("software", "Deployment", "pass"),
        ("memory", "Hardware", "pass"),
        ("pcie", "Integration", "pass"),
    ]
    assert all(t["gpus"] == {"0": "pass"} for t in result["tests"])
    assert result["version"] == "4.4.2" and result["ok"] is True and result["error"] is None


def test_4x_fail_row_with_passing_gpus_stays_failed() -> None:
    result = parse("text_423_pcie_fail_internal_error_full.txt")
    pcie = next(t for t in result["tests"] if t["name"] == "pcie")
    assert pcie["status"] == "fail" and pcie["gpus"] == {str(i): "pass" for i in range(4)}
    assert len(pcie["messages"]) == 4
    assert pcie["messages"][0] == (
        "There was an internal error during the test: 'A child process (152) exited with non-zero status 1'"
        " Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
    )
    assert pcie["messages"][3].endswith("Reset GPU. Restart DCGM. Rerun diagnostics.")
    assert result["failed"] == ["pcie"] and result["ok"] is False


def test_4x_eight_gpus_without_banner() -> None:
    result = parse("text_441_b200_8gpu_pcie_fail_slurm.txt")
    assert result["version"] == "4.4.1" and result["driver_version"] == "570.172.08"
    software = result["tests"][0]
    assert software["name"] == "software" and software["gpus"] == {str(i): "pass" for i in range(8)}
    (message,) = result["tests"][2]["messages"]
    assert "'Output of child process (11167) couldn't be parsed: '* Line 1, Column 1" in message
    assert message.endswith(
        "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics."
    )
    assert result["failed"] == ["pcie"]


def test_4x_everything_skipped_is_listed() -> None:
    result = parse("text_442_gb10_r3_skipped.txt")
    assert len(result["tests"]) == 8 and result["failed"] == []
    assert result["skipped"] == [
        "memory",
        "diagnostic",
        "nvbandwidth",
        "pcie",
        "memory_bandwidth",
        "targeted_stress",
        "targeted_power",
    ]
    assert result["tests"][-1]["gpus"] == {"0": "skip"} and result["tests"][-1]["category"] == "Stress"


def test_dcgmi_error_without_table_keeps_both_lines() -> None:
    result = parse("text_441_error_cannot_load_plugins.txt")
    assert result["tests"] == [] and result["ok"] is False
    assert result["error"].startswith(
        "Error: Unable to complete diagnostic for entities 0,1,2,3. Return: (-30)"
    )
    assert "Cannot load plugins. Unable to change to the plugin dir" in result["error"]


def test_json_runtime_error_and_renamed_root() -> None:
    """Fields documented in NVIDIA/DCGM nvvs JsonResult.hpp ("runtime_error", "Warning", status words in
    capitals, gpu_ids as a number); documents built here, not captures."""
    doc = {"DCGM GPU Diagnostic": {"version": "3.3.1", "runtime_error": "Couldn't find the CUDA library"}}
    result = parse_dcgmi_diag(json.dumps(doc))
    assert result["tests"] == [] and result["ok"] is False
    assert result["error"] == "Couldn't find the CUDA library" and result["version"] == "3.3.1"
    renamed = {
        "Diagnostic": {
            "Warning": "Deprecated option",
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [{"name": "diagnostic", "results": [{"gpu_ids": 0, "status": "FAIL"}]}],
                }
            ],
        }
    }
    result = parse_dcgmi_diag(json.dumps(renamed))
    assert result["failed"] == ["diagnostic"] and result["tests"][0]["gpus"] == {"0": "fail"}
    assert result["warning"] == "Deprecated option" and result["error"] is None


def test_2x_level_4_all_sections_pass() -> None:
    result = parse("text_2x_r4_blacklist_memtest_pass.txt")
    names = [t["name"] for t in result["tests"]]
    assert names[0] == "Blacklist" and names[-1] == "Memtest" and len(names) == 18
    by_name = {t["name"]: t for t in result["tests"]}
    assert by_name["Pulse Test"]["category"] == "Hardware" and by_name["SM Stress"]["category"] == "Stress"
    assert all(t["status"] == "pass" for t in result["tests"]) and result["ok"] is True


def test_1x_indented_table_with_performance_section() -> None:
    result = parse("text_1x_r2_performance_section_indented.txt")
    assert len(result["tests"]) == 15
    by_name = {t["name"]: t for t in result["tests"]}
    assert by_name["CUDA Toolkit Libraries"]["status"] == "skip"
    assert by_name["PCIe"]["status"] == "pass" and by_name["PCIe"]["category"] == "Integration"
    assert by_name["Targeted Performance"]["category"] == "Performance"
    assert result["skipped"] == [
        "CUDA Toolkit Libraries",
        "Diagnostic",
        "SM Performance",
        "Targeted Performance",
        "Targeted Power",
    ]
    assert result["ok"] is True


def test_deployment_failures_then_empty_sections() -> None:
    result = parse("text_2x_deployment_fail_empty_sections.txt")
    assert len(result["tests"]) == 9 and all(t["category"] == "Deployment" for t in result["tests"])
    assert result["failed"] == [
        "Persistence Mode",
        "Environment Variables",
        "Page Retirement",
        "Graphics Processes",
        "Inforom",
    ]
    assert result["ok"] is False


def test_qualified_message_rows_are_messages_not_tests() -> None:
    """A message row whose left cell names the GPU ("Warning: GPU1") stays a message of the test above it;
    built from the rows of text_441_b200_8gpu_pcie_fail_slurm.txt with the left cell changed."""
    lines = (DATA / "text_441_b200_8gpu_pcie_fail_slurm.txt").read_text().splitlines()
    changed = [
        line.replace("| Warning                   |", "| Warning: GPU1             |") for line in lines
    ]
    result = parse_dcgmi_diag("\n".join(changed))
    assert [t["name"] for t in result["tests"]] == ["software", "memory", "pcie"]
    (message,) = result["tests"][2]["messages"]
    assert message.startswith("GPU1: There was an internal error during the test:")
