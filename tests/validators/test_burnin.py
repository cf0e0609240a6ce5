"""matmul-burnin judged on workload results; dcgm-diag and gpu-burn on captured output."""

from __future__ import annotations

import json

import pytest
from conftest import FakeRunner, captured, gpu_config, make_context

from validators.checks.burnin import DcgmDiag, GpuBurn, MatmulBurnin
from validators.suite import run_check

NVSMI = ("nvidia-smi", "-q", "-x")
GPU_OK = (0, captured("nvidia-smi", "q_550_a10_pcie_gen1.txt"), "")


def matmul_output(rates: list, digests: list = None, mismatches: list = None) -> str:
    """What workloads/matmul.py prints (its own format, not a third-party capture)."""
    devices = [
        {
            "index": i,
            "reps": 100,
            "seconds": 10.0,
            "gflops": r * 1000,
            "mismatches": (mismatches or [0] * len(rates))[i],
            "digest": (digests or ["a" * 64] * len(rates))[i],
            "dtype": "bfloat16",
        }
        for i, r in enumerate(rates)
    ]
    return json.dumps({"device_type": "cuda", "dim": 8192, "devices": devices}) + "\n"


CLEAN_LOG = (0, captured("xid", "dmesg_T_xid13_no_pid.txt"), "")  # 8 application Xids, before the run


def run_matmul(stdout: str, nvsmi: tuple = GPU_OK, journal: object = CLEAN_LOG) -> object:
    cfg = gpu_config(durations={"burnin_seconds": 1, "telemetry_interval_seconds": 0.01})
    runner = FakeRunner({NVSMI: nvsmi, ("journalctl", "-k"): journal})
    ctx = make_context(cfg, runner)
    runner.answers[(ctx.python, ctx.workload("matmul.py"))] = (0, stdout, "")
    return run_check(MatmulBurnin(), ctx)


def test_eight_equal_gpus_pass() -> None:
    result = run_matmul(matmul_output([780, 781, 779, 782, 780, 778, 781, 780]))
    assert result.status == "pass", result.summary
    assert result.metrics["rate_median"] == {"value": 780.0, "unit": "TFLOP/s"}
    assert result.metrics["telemetry_samples"]["value"] >= 1


def test_a_slow_device_fails_against_the_node_median() -> None:
    result = run_matmul(matmul_output([780, 781, 779, 782, 700, 778, 781, 780]))
    assert result.status == "fail"
    assert result.summary == "device 4: 700.000 TFLOP/s is 10.3% below the node median 780.000 (limit 7%)"


def test_below_the_catalogue_floor_fails() -> None:
    result = run_matmul(matmul_output([650] * 8))
    assert result.status == "fail"
    assert "device 0: 650.000 TFLOP/s below the floor 700 TFLOP/s (matmul.tflops_min)" in result.summary


def test_results_not_bit_identical_across_devices_or_repetitions_fail() -> None:
    digests = ["a" * 64] * 7 + ["b" * 64]
    result = run_matmul(matmul_output([780] * 8, digests=digests))
    assert result.status == "fail"
    assert result.summary.startswith(
        "devices [7] computed a different result from devices [0, 1, 2, 3, 4, 5, 6]"
    )
    result = run_matmul(matmul_output([780] * 8, mismatches=[0, 0, 3, 0, 0, 0, 0, 0]))
    assert result.status == "fail"
    assert "device 2: result changed across repetitions (3 of 100 not bit-identical)" in result.summary


def test_gpu_matmul_without_a_driver_fails_before_starting_torch() -> None:
    result = run_matmul("", nvsmi=(127, "", "nvidia-smi: command not found"))
    assert result.status == "fail"
    assert result.summary.startswith("nvidia-smi not found")


def dcgm(profile: str, text: str, rc: int = 0) -> tuple:
    runner = FakeRunner({("dcgmi", "diag"): (rc, text, "")})
    return run_check(DcgmDiag(), make_context(gpu_config(), runner, profile)), runner


def test_dcgm_pass_and_level_per_profile() -> None:
    result, runner = dcgm("standard", captured("dcgmi-diag", "json_3x_dcgm_test_real_output.txt"))
    assert result.status == "pass", result.summary
    assert runner.calls[0] == ["dcgmi", "diag", "-r", "3", "-j"]
    _, runner = dcgm("full", captured("dcgmi-diag", "json_3x_dcgm_test_real_output.txt"))
    assert runner.calls[0][3] == "4"


def test_dcgm_failure_names_the_failed_test() -> None:
    result, _ = dcgm("standard", captured("dcgmi-diag", "json_4x_gb10_software_fail.json"), rc=226)
    assert result.status == "fail"
    assert result.summary.startswith("dcgmi diag -r 3: failed software")


def test_dcgm_missing_fails() -> None:
    result, _ = dcgm("standard", "", rc=127)
    assert result.status == "fail"


GPU_BURN_DIR: dict = {}


@pytest.fixture(autouse=True)
def gpu_burn_build(tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """A gpu-burn build folder: the binary and its compare kernel (as `make` leaves them)."""
    if "dir" not in GPU_BURN_DIR:
        folder = tmp_path_factory.mktemp("gpu-burn")
        (folder / "gpu_burn").write_text("")
        (folder / "compare.fatbin").write_text("")
        GPU_BURN_DIR["dir"] = folder


def burn(text: str, count: int, stderr: str = "", path: str = "") -> object:
    binary = path or str(GPU_BURN_DIR["dir"] / "gpu_burn")
    cfg = gpu_config(gpu={"count": count, "model": "RTX"}, gpu_burn={"path": binary})
    runner = FakeRunner({(binary,): (0, text, stderr)})
    result = run_check(GpuBurn(), make_context(cfg, runner, "full"))
    burn.calls = runner.calls  # type: ignore[attr-defined]
    return result


def test_gpu_burn_faulty_gpus_fail_although_it_exits_zero() -> None:
    result = burn(captured("gpu-burn", "faulty_16gpus_exit0.txt"), 16)
    assert result.status == "fail"
    assert "FAULTY" in result.summary


def test_gpu_burn_that_dies_fails() -> None:
    result = burn(captured("gpu-burn", "died_no_clients_alive.txt"), 8)
    assert result.status == "fail"
    assert "No clients are alive" in result.summary


def test_an_xid_that_appears_during_the_burn_in_fails_it() -> None:
    before = captured("xid", "dmesg_T_xid13_no_pid.txt")
    after = before + captured("xid", "xid79_fallen_off_bus_line.txt")
    result = run_matmul(matmul_output([780] * 8), journal=[(0, before, ""), (0, after, "")])
    assert result.status == "fail"
    assert result.summary == "during the burn-in: Xid 79 on 0000:44:00: GPU has fallen off the bus"
    assert result.metrics["new_xid_events"]["value"] == 1
    result = run_matmul(matmul_output([780] * 8))  # the same log before and after: the old Xids do not count
    assert result.status == "pass" and result.metrics["new_xid_events"]["value"] == 0


def test_rates_without_a_floor_warn() -> None:
    cfg_rates = matmul_output([780] * 8)
    runner = FakeRunner({NVSMI: GPU_OK, ("journalctl", "-k"): CLEAN_LOG})
    cfg = gpu_config(durations={"burnin_seconds": 1, "telemetry_interval_seconds": 0.01})
    del cfg["thresholds"]["matmul.tflops_min"]
    ctx = make_context(cfg, runner)
    runner.answers[(ctx.python, ctx.workload("matmul.py"))] = (0, cfg_rates, "")
    result = run_check(MatmulBurnin(), ctx)
    assert result.status == "warn"
    assert (
        result.summary
        == "no threshold matmul.tflops_min in NODE.json; rates measured, not judged against a floor"
    )


@pytest.mark.slow
def test_the_nondeterministic_fault_hook_fails_the_cpu_burn_in(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Real workers on the CPU path: with the hook file present, device 1 is one ulp off in one
    repetition and the check names it; without it the same run passes."""
    pytest.importorskip("torch")
    from conftest import tiny_cpu_config

    from validators.runner import run_command

    faults = tmp_path / "faults"
    faults.mkdir()
    monkeypatch.setenv("VALIDATORS_FAULT_DIR", str(faults))
    cfg = tiny_cpu_config(tmp_path)
    healthy = run_check(MatmulBurnin(), make_context(cfg, run_command))  # type: ignore[arg-type]
    assert healthy.status == "pass", healthy.summary
    assert not any("FAULT INJECTION" in line for line in healthy.evidence["lines"])
    (faults / "nondeterministic").write_text("1\n")
    faulty = run_check(MatmulBurnin(), make_context(cfg, run_command))  # type: ignore[arg-type]
    assert faulty.status == "fail"
    assert faulty.summary.startswith("device 1: result changed across repetitions (1 of ")
    assert "not bit-identical; 1 element(s) off by up to " in faulty.summary
    assert any(line.startswith("FAULT INJECTION ACTIVE") for line in faulty.evidence["lines"])
    assert faulty.metrics["fault_injection"]["value"] == 1


def test_gpu_burn_records_a_rate_per_gpu_for_the_fleet_judge() -> None:
    result = burn(captured("gpu-burn", "faulty_16gpus_exit0.txt"), 16)
    assert result.metrics["rate_device_15"] == {"value": 6439.0, "unit": "GFLOP/s"}
    assert len([m for m in result.metrics if m.startswith("rate_device_")]) == 16
    from clusterforge.certify.fleet.metrics import check_figures

    figures = check_figures({"id": "gpu-burn", "status": "fail", "metrics": result.metrics})
    assert [f.metric for f in figures] == ["gpu-burn.rate"]  # one figure: the worst GPU
    assert figures[0].value == min(m["value"] for m in result.metrics.values())


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_vanished_device_hook_fails_the_cpu_burn_in_naming_the_device(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Real torch workers on the CPU path: device 1 fails before the start barrier, the other is
    released at once (the barrier is broken, not waited out) and the check names device 1."""
    pytest.importorskip("torch")
    from conftest import tiny_cpu_config

    from validators.runner import run_command

    faults = tmp_path / "faults"
    faults.mkdir()
    (faults / "vanished-device").write_text("1\n")
    monkeypatch.setenv("VALIDATORS_FAULT_DIR", str(faults))
    result = run_check(MatmulBurnin(), make_context(tiny_cpu_config(tmp_path), run_command))  # type: ignore[arg-type]
    assert result.status == "fail"
    assert result.summary == (
        "device 1: RuntimeError: device 1 vanished before the start (fault injection) (before the start)"
    )
    assert "device 0: did not start: a peer failed or was not ready in time" in result.evidence["lines"]
    assert any(line.startswith("FAULT INJECTION ACTIVE") for line in result.evidence["lines"])


def test_a_device_between_the_warn_and_fail_bands_warns() -> None:
    """Azure's GEMM bands: 3.5 % under the expected figure warns, 7 % fails (was: 5 % failed)."""
    result = run_matmul(matmul_output([780, 781, 779, 782, 740, 778, 781, 780]))
    assert result.status == "warn", result.summary
    assert result.summary == "device 4: 740.000 TFLOP/s is 5.1% below the node median 780.000 (warn at 3.5%)"


def test_gpu_burn_is_given_its_compare_kernel_by_path() -> None:
    """gpu_burn loads compare.fatbin (compare.ptx before 2026-05) relative to its working directory,
    which is the suite's: without -c it aborts on a healthy node (wilicc/gpu-burn gpu_burn-drv.cpp)."""
    burn(captured("gpu-burn", "a2000_ok_no_progress.txt"), 1)
    (argv,) = burn.calls  # type: ignore[attr-defined]
    folder = GPU_BURN_DIR["dir"]
    assert argv[:3] == [str(folder / "gpu_burn"), "-c", str(folder / "compare.fatbin")]


def test_gpu_burn_older_build_gets_its_ptx_kernel(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "gpu_burn").write_text("")
    (tmp_path / "compare.ptx").write_text("")
    burn(captured("gpu-burn", "a2000_ok_no_progress.txt"), 1, path=str(tmp_path / "gpu_burn"))
    assert burn.calls[0][1:3] == ["-c", str(tmp_path / "compare.ptx")]  # type: ignore[attr-defined]


def test_gpu_burn_without_a_compare_kernel_fails_before_running(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "gpu_burn").write_text("")
    result = burn("", 1, path=str(tmp_path / "gpu_burn"))
    assert result.status == "fail"
    assert result.summary.startswith("gpu-burn: no compare kernel (compare.fatbin or compare.ptx) next to ")
    assert burn.calls == []  # type: ignore[attr-defined]


def test_gpu_burn_init_failure_on_stderr_is_the_reason() -> None:
    """gpu_burn writes "Couldn't init a GPU test: ..." to stderr (gpu_burn-drv.cpp), not stdout."""
    err = captured("gpu-burn", "k80_load_module_error_died_snip.txt")
    line = next(x for x in err.splitlines() if "Couldn't init a GPU test" in x)
    result = burn("", 1, stderr=line + "\n")
    assert result.status == "fail"
    assert "Couldn't init a GPU test" in result.summary
