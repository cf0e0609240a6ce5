"""gpu-burn parser on captured outputs (tests/data/gpu-burn, sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validators.parsers.gpu_burn import parse_gpu_burn

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu-burn"
CAPTURES = sorted(DATA.glob("*.txt"))


def parse(name: str) -> dict:
    return parse_gpu_burn((DATA / name).read_text())


def test_every_capture_is_listed_in_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    for path in CAPTURES:
        assert f"`{path.name}`" in sources


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_properties_hold_on_every_capture(path: Path) -> None:
    result = parse_gpu_burn(path.read_text())
    json.dumps(result)
    assert [g["index"] for g in result["gpus"]] == list(range(len(result["gpus"])))
    if result["ok"]:
        assert result["complete"] and all(g["ok"] for g in result["gpus"])
    if not result["complete"]:
        assert result["ok"] is False


def test_faulty_gpus_fail_although_gpu_burn_exits_zero() -> None:
    result = parse("faulty_16gpus_exit0.txt")
    assert result["complete"] is True and result["ok"] is False
    assert len(result["gpus"]) == 16 and all(g["ok"] is False for g in result["gpus"])
    assert result["gpus"][0]["errors"] == 0 and result["gpus"][0]["iterations"] == 18000
    assert result["gpus"][1]["errors"] == -524288000 and result["gpus"][1]["error_flag"] == "warning"
    assert result["gpus"][15]["gflops"] == 6439.0 and result["gpus"][15]["temp_c"] == 52
    assert sum(1 for g in result["gpus"] if g["error_flag"] == "warning") == 7


def test_run_without_summary_is_incomplete() -> None:
    result = parse("a500_no_summary.txt")
    assert result["complete"] is False and result["ok"] is False
    (gpu,) = result["gpus"]
    assert gpu["name"] == "NVIDIA RTX A500 Embedded GPU" and gpu["ok"] is None
    assert (gpu["iterations"], gpu["gflops"], gpu["errors"], gpu["temp_c"]) == (30, 3519.0, 0, 53)
    assert result["progress_percent"] == 100.0


def test_ok_verdict_without_any_iteration_is_not_trusted() -> None:
    result = parse("a2000_ok_no_progress.txt")
    assert result["complete"] is True and result["gpus"][0]["ok"] is True
    assert result["ok"] is False and "without any completed iteration" in result["error"]


def test_died_gpus_and_abort() -> None:
    result = parse("died_no_clients_alive.txt")
    assert len(result["gpus"]) == 8 and all(g["error_flag"] == "died" for g in result["gpus"])
    assert result["gpus"][7]["errors"] == 1278531568
    assert result["error"] == "No clients are alive!  Aborting" and result["ok"] is False


# ---- edge handling (inputs built here, not captures) ----


def test_records_glued_without_newline_and_clean_pass() -> None:
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n"
        "50.0%  proc'd: 10 (700 Gflop/s)   errors: 0   temps: 40 C 100.0%  proc'd: 20 (710 Gflop/s)   "
        "errors: 0   temps: 41 C \nKilling processes.. done\n\nTested 1 GPUs:\n\tGPU 0: OK\n"
    )
    result = parse_gpu_burn(text)
    assert (
        result["ok"] is True
        and result["gpus"][0]["iterations"] == 20
        and result["gpus"][0]["gflops"] == 710.0
    )


# ---- captures added in the second pass (sources in SOURCES.md) ----


def test_2019_release_without_verdict_is_incomplete() -> None:
    result = parse("k80_2019_no_verdict.txt")
    (gpu,) = result["gpus"]
    assert gpu["name"] == "Tesla K80" and gpu["iterations"] == 1908 and gpu["gflops"] == 2273.0
    assert gpu["temp_c"] == 66 and gpu["ok"] is None
    assert result["progress_percent"] == 100.0 and result["complete"] is False and result["ok"] is False


def test_init_failure_and_died_gpu() -> None:
    result = parse("k80_load_module_error_died_snip.txt")
    assert result["error"] == 'Couldn\'t init a GPU test: Error in "load module":'
    assert [g["iterations"] for g in result["gpus"]] == [-1, 0, 0, 0]
    assert result["gpus"][0]["error_flag"] == "died" and result["gpus"][0]["errors"] == -1903218736
    assert result["gpus"][3]["temp_c"] == 31 and result["progress_percent"] == 50.0
    assert result["ok"] is False and result["complete"] is False


def test_two_gpus_cut_before_verdict() -> None:
    result = parse("rtx4090x2_second_gpu_late_cut.txt")
    assert [g["iterations"] for g in result["gpus"]] == [405, 324]
    assert [g["gflops"] for g in result["gpus"]] == [52045.0, 51946.0]
    assert result["progress_percent"] == 90.0 and result["complete"] is False and result["ok"] is False


def test_record_cut_inside_temps() -> None:
    result = parse("gtx1080x2_docker_cut.txt")
    assert result["gpus"][0]["name"] == "NVIDIA GeForce GTX 1080"
    assert [g["iterations"] for g in result["gpus"]] == [21892, 21312]
    assert [g["temp_c"] for g in result["gpus"]] == [62, None]
    assert result["progress_percent"] == 91.7 and result["complete"] is False


def test_rate_is_the_median_of_each_gpus_nonzero_progress_figures() -> None:
    # GPU 0: 47174 52502 52502 52371 52045; GPU 1: (0) 46929 51733 52472 51946 -- the 0 is "not yet reported"
    result = parse("rtx4090x2_second_gpu_late_cut.txt")
    assert [g["gflops_median"] for g in result["gpus"]] == [52371.0, (51733.0 + 51946.0) / 2]
    assert parse("a2000_ok_no_progress.txt")["gpus"][0]["gflops_median"] is None  # no progress line
