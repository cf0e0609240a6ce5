"""nccl-single-node / nccl-multi-node judged on captured nccl-tests output (tests/data/nccl-tests)."""

from __future__ import annotations

from conftest import FakeRunner, captured, gpu_config, make_context

from validators.checks.nccl import NcclMultiNode, NcclSingleNode, bench_args, launcher_argv
from validators.suite import run_check

NVSMI = ("nvidia-smi", "-q", "-x")
GPU_OK = (0, captured("nvidia-smi", "q_550_a10_pcie_gen1.txt"), "")
BIN = "/opt/nccl-tests/build/all_reduce_perf"


def single(collectives: list, answer: tuple, thresholds: dict) -> dict:
    cfg = gpu_config(thresholds=thresholds)
    cfg["nccl"] = dict(cfg["nccl"], collectives=collectives)
    runner = FakeRunner({NVSMI: GPU_OK, (BIN,): answer})
    return {"ctx": make_context(cfg, runner), "runner": runner}


def test_wrong_values_fail_even_when_the_exit_code_is_zero() -> None:
    s = single(["all_reduce"], (0, captured("nccl-tests", "wrong_values_failed.txt"), ""), {})
    result = run_check(NcclSingleNode(), s["ctx"])
    assert result.status == "fail"
    assert "all_reduce: wrong values at 27 message size(s)" in result.summary
    assert "108 out-of-bounds values" in result.summary


def test_nonzero_exit_fails_with_the_tools_reason() -> None:
    s = single(["all_reduce"], (7, captured("nccl-tests", "wrong_values_failed.txt"), ""), {})
    result = run_check(NcclSingleNode(), s["ctx"])
    assert result.status == "fail"
    assert result.summary.startswith("all_reduce: all_reduce_perf failed (rc 7)")


def test_crashed_run_without_footer_fails() -> None:
    s = single(["all_reduce"], (1, captured("nccl-tests", "crashed_midtable_cuda_error.txt"), ""), {})
    result = run_check(NcclSingleNode(), s["ctx"])
    assert result.status == "fail"
    assert "did not reach its footer" in result.summary
    assert any("Test NCCL failure" in line for line in result.evidence["lines"])


def test_busbw_judged_on_large_rows_against_the_threshold() -> None:
    text = captured("nccl-tests", "mpirun_prefixed_eks_p5.txt")  # busbw 313.29 at 1 GiB, 437.79 at 2 GiB
    ok = single(
        ["all_reduce"],
        (0, text, ""),
        {"nccl.all_reduce.1node.busbw_gbps": 300, "nccl.all_reduce.1node.message_bytes": 1 << 30},
    )
    result = run_check(NcclSingleNode(), ok["ctx"])
    assert result.status == "pass", result.summary
    assert result.threshold["nccl.all_reduce.1node.busbw_gbps"]["value"] == 300
    curve = result.to_json()["series"]["all_reduce.busbw"]
    assert (curve["x_unit"], curve["y_unit"]) == ("B", "GB/s")
    assert curve["points"][0] == [0, 0.0] and curve["points"][-1] == [2147483648, 437.79]
    assert result.metrics["all_reduce.busbw"] == {"value": 313.29, "unit": "GB/s"}  # the worst judged row
    slow = single(
        ["all_reduce"],
        (0, text, ""),
        {"nccl.all_reduce.1node.busbw_gbps": 400, "nccl.all_reduce.1node.message_bytes": 1 << 30},
    )
    result = run_check(NcclSingleNode(), slow["ctx"])
    assert result.status == "fail"
    assert (
        "busbw 313.29 GB/s below 400 GB/s (nccl.all_reduce.1node.busbw_gbps) at 1073741824 B"
        in result.summary
    )
    # Without a message size, only the largest row (2 GiB, 437.79) is judged.
    largest = single(["all_reduce"], (0, text, ""), {"nccl.all_reduce.1node.busbw_gbps": 400})
    assert run_check(NcclSingleNode(), largest["ctx"]).status == "pass"


def test_missing_threshold_is_a_warning_not_a_silent_pass() -> None:
    s = single(["all_reduce"], (0, captured("nccl-tests", "mpirun_prefixed_eks_p5.txt"), ""), {})
    result = run_check(NcclSingleNode(), s["ctx"])
    assert result.status == "warn"
    assert "no threshold nccl.all_reduce.1node.busbw_gbps" in result.summary


def test_bench_args_reach_the_thresholds_message_size() -> None:
    ctx = make_context(gpu_config(), FakeRunner({}))
    argv = bench_args(ctx.config, "all_reduce", 1, 8)
    assert argv[0] == BIN
    assert argv[argv.index("-e") + 1] == str(8 << 30)  # p5 example: threshold at 8 GiB
    assert argv[argv.index("-g") + 1] == "8" and argv[argv.index("-c") + 1] == "1"


def test_multi_node_pairwise_names_the_slow_peer() -> None:
    cfg = gpu_config(
        peers=[{"name": "gpu-002", "address": "10.0.0.2"}, {"name": "gpu-003", "address": "10.0.0.3"}]
    )
    cfg["nccl"] = dict(cfg["nccl"], pairwise=True)
    good = (0, captured("nccl-tests", "mpirun_prefixed_eks_p5.txt"), "")
    bad = (1, captured("nccl-tests", "crashed_midtable_cuda_error.txt"), "")
    runner = FakeRunner(
        {("srun", "--nodelist=gpu-001,gpu-002"): good, ("srun", "--nodelist=gpu-001,gpu-003"): bad}
    )
    result = run_check(NcclMultiNode(), make_context(cfg, runner, "standard"))
    assert result.status == "fail"
    assert "slow or failing pairs with: gpu-003" in result.summary
    assert len(runner.calls) == 2
    assert runner.calls[0][:5] == [
        "srun",
        "--nodelist=gpu-001,gpu-002",
        "--nodes=2",
        "--ntasks-per-node=8",
        "--mpi=pmix",
    ]
    assert runner.calls[0][runner.calls[0].index("-g") + 1] == "1"  # one rank per GPU


def test_multi_node_without_launcher_fails_and_without_peers_skips() -> None:
    cfg = gpu_config(peers=[{"name": "gpu-002", "address": "10.0.0.2"}])
    cfg["nccl"] = {"tests_dir": "/opt/nccl-tests/build"}
    result = run_check(NcclMultiNode(), make_context(cfg, FakeRunner({}), "standard"))
    assert result.status == "fail" and "no nccl.launcher" in result.summary
    skipped = run_check(NcclMultiNode(), make_context(gpu_config(), FakeRunner({}), "standard"))
    assert skipped.status == "skip" and "no peers" in skipped.summary


def test_launcher_placeholders() -> None:
    cfg = gpu_config(peers=[{"name": "gpu-002", "address": "10.0.0.2"}])
    cfg["nccl"]["launcher"] = ["mpirun", "-np", "{ranks}", "-H", "{peer_addresses}", "--nodes={nnodes}"]
    ctx = make_context(cfg, FakeRunner({}))
    assert launcher_argv(ctx.config, ctx.config.peers) == [
        "mpirun",
        "-np",
        "16",
        "-H",
        "10.0.0.2",
        "--nodes=2",
    ]
