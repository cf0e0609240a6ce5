"""nccl-tests parser on captured outputs (tests/data/nccl-tests, sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validators.parsers.nccl_tests import parse_nccl_tests

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
CAPTURES = sorted(DATA.glob("*.txt"))


def parse(name: str) -> dict:
    return parse_nccl_tests((DATA / name).read_text())


def row_of(result: dict, size: int) -> dict:
    return next(row for row in result["rows"] if row["size"] == size)


def test_every_capture_is_listed_in_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    assert CAPTURES, "no captures found"
    for path in CAPTURES:
        assert f"`{path.name}`" in sources, f"{path.name} has no source note in SOURCES.md"


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_properties_hold_on_every_capture(path: Path) -> None:
    result = parse_nccl_tests(path.read_text())
    json.dumps(result)  # JSON-serialisable
    for key in ("collective", "ranks", "rows", "out_of_bounds", "avg_busbw", "complete", "ok", "errors"):
        assert key in result
    sizes = [row["size"] for row in result["rows"]]
    if result["runs"] <= 1 and len({(r["type"], r["redop"]) for r in result["rows"]}) <= 1:
        # (a log of several runs, or one run over several ops/types, starts again at the smallest size)
        assert sizes == sorted(sizes), "rows must come out in the printed (ascending) order"
    for row in result["rows"]:
        for side in ("out_of_place", "in_place"):
            part = row[side]
            assert set(part) >= {"time_us", "algbw", "busbw", "wrong", "error"}
            assert part["time_us"] is not None and part["time_us"] >= 0
            assert part["busbw"] is not None and part["algbw"] is not None
            # exactly one of the two checking styles per release (or neither with N/A)
            assert part["wrong"] is None or part["error"] is None
    if result["ok"]:
        assert result["complete"] and result["out_of_bounds"] == 0 and not result["errors"]


def test_wrong_values_and_failed_footer() -> None:
    result = parse("wrong_values_failed.txt")
    assert result["ranks"] == 2
    assert len(result["rows"]) == 27
    assert result["out_of_bounds"] == 108
    assert result["avg_busbw"] == pytest.approx(3.02663)
    assert result["complete"] is True
    assert result["ok"] is False
    first = row_of(result, 8)
    assert first["out_of_place"]["wrong"] == 4 and first["in_place"]["wrong"] == 4
    # %g e-notation in the #wrong column
    row = row_of(result, 2097152)
    assert row["out_of_place"]["wrong"] == 1048580
    assert row["out_of_place"]["busbw"] == pytest.approx(6.73)
    assert row_of(result, 536870912)["in_place"]["time_us"] == pytest.approx(73092)


def test_old_error_column_with_interleaved_nccl_info() -> None:
    result = parse("old_error_column_nccl_info.txt")
    assert result["ranks"] == 4
    assert len(result["rows"]) == 7
    row = row_of(result, 1073741824)
    assert row["redop"] == "sum" and row["root"] is None
    assert row["out_of_place"] == {
        "time_us": 631353.0,
        "algbw": 1.70,
        "busbw": 2.55,
        "wrong": None,
        "error": 2e-07,
    }
    assert result["out_of_bounds"] == 0 and result["ok"] is True
    assert result["avg_busbw"] == pytest.approx(2.54225)


def test_old_all_gather_without_redop_or_root_fails_on_out_of_bounds() -> None:
    result = parse("old_no_root_no_redop_failed.txt")
    assert result["collective"] == "all_gather"
    assert result["ranks"] == 12
    assert len(result["rows"]) == 31
    last = row_of(result, 8589934560)
    assert last["redop"] is None and last["root"] is None
    assert last["out_of_place"]["error"] == 1.0
    assert last["in_place"]["busbw"] == pytest.approx(112.34)
    assert result["out_of_bounds"] == 4
    assert result["complete"] is True and result["ok"] is False


def test_old_broadcast_has_root_but_no_redop() -> None:
    result = parse("old_broadcast_root_no_redop.txt")
    assert result["collective"] == "broadcast"
    row = row_of(result, 1073741824)
    assert row["root"] == 0 and row["redop"] is None
    assert row["out_of_place"]["busbw"] == pytest.approx(121.24)
    assert result["ok"] is True


def test_srun_prefixed_table_without_footer() -> None:
    result = parse("srun_prefixed_p5_2node.txt")
    assert len(result["rows"]) == 32
    row = row_of(result, 17179869184)
    assert row["out_of_place"]["busbw"] == pytest.approx(487.09)
    assert row["in_place"]["busbw"] == pytest.approx(487.26)
    assert row_of(result, 1073741824)["in_place"]["busbw"] == pytest.approx(440.96)
    assert result["complete"] is False and result["ok"] is False


def test_mpirun_tagged_output_with_elision() -> None:
    result = parse("mpirun_prefixed_eks_p5.txt")
    assert [row["size"] for row in result["rows"]][:2] == [0, 67108864]
    assert row_of(result, 2147483648)["in_place"]["busbw"] == pytest.approx(437.89)
    assert result["out_of_bounds"] == 0
    assert result["avg_busbw"] == pytest.approx(52.9753)
    assert result["complete"] is True and result["ok"] is True


def test_not_available_wrong_column() -> None:
    result = parse("na_wrong_alltoall_rtx5090.txt")
    assert result["collective"] == "alltoall"
    (row,) = result["rows"]
    assert row["redop"] == "none" and row["root"] == -1
    assert row["out_of_place"]["wrong"] == 0
    assert row["in_place"]["wrong"] is None and row["in_place"]["error"] is None
    assert row["in_place"]["algbw"] == pytest.approx(43046.10)
    assert result["avg_busbw"] == 0.0


def test_crash_mid_table() -> None:
    result = parse("crashed_midtable_cuda_error.txt")
    assert len(result["rows"]) == 5
    assert row_of(result, 17179869184)["out_of_place"]["busbw"] == pytest.approx(367.29)
    assert result["complete"] is False and result["ok"] is False
    assert result["out_of_bounds"] is None and result["avg_busbw"] is None
    assert len(result["errors"]) == 8
    assert result["errors"][0].startswith("HCA-128: Test NCCL failure common.cu:1204")


def test_new_header_names_collective_and_version() -> None:
    result = parse("new_header_crash_h200.txt")
    assert result["collective"] == "all_reduce"
    assert result["version"] == "2.19.7"
    assert result["ranks"] == 4
    assert result["devices"][3]["name"] == "NVIDIA H200"
    assert result["rows"] == [] and result["complete"] is False
    assert "an illegal memory access was encountered" in result["errors"][0]
    assert len(result["errors"]) == 7


def test_oldest_nccl1_header_and_failure() -> None:
    result = parse("nccl1_oldest_format_failure.txt")
    assert result["collective"] == "all_reduce"
    assert result["ranks"] == 8
    assert result["errors"] == ["NCCL failure all_reduce.cu:95 'unhandled cuda error'"]
    assert result["ok"] is False


# ---- edge handling (inputs built here, not captures) ----


def test_truncated_capture_is_incomplete() -> None:
    """Derived: the first 15 lines of a real capture, as a run killed mid-table would leave it."""
    lines = (DATA / "old_error_column_nccl_info.txt").read_text().splitlines()[:15]
    result = parse_nccl_tests("\n".join(lines))
    assert len(result["rows"]) == 3
    assert result["complete"] is False and result["ok"] is False


def test_rows_without_header_are_guessed_by_column_count() -> None:
    text = (
        "    33554432       8388608     float     sum    19902    1.69    2.53  2e-07    19898    1.69    2.53  2e-07\n"
        "           8             2     float     sum      -1    21.33    0.00    0.00      4    20.55    0.00    0.00      4\n"
    )
    rows = parse_nccl_tests(text)["rows"]
    assert rows[0]["root"] is None and rows[0]["out_of_place"]["error"] == 2e-07
    assert rows[1]["root"] == -1 and rows[1]["out_of_place"]["wrong"] == 4


def test_json_output_of_dash_j() -> None:
    """Shape written by -J (nccl-tests src/util.cu writeBenchmarkLine*/writeResultFooter; versioned JSON)."""
    doc = {
        "version": 3,
        "start_time": "2025-01-01 00:00:00",
        "args": ["./build/all_reduce_perf", "-J", "x.json"],
        "env": [],
        "nccl_version": 22703,
        "config": {"nthreads": 1, "ngpus": 8, "devices": [{"rank": i} for i in range(8)]},
        "results": [
            {
                "size": 1073741824,
                "count": 268435456,
                "type": "float",
                "redop": "sum",
                "root": "    -1",
                "out_of_place": {"time": 4523.6, "alg_bw": 237.36, "bus_bw": 356.04, "nwrong": 0.0},
                "in_place": {"time": 4539.8, "alg_bw": 236.51, "bus_bw": 354.77, "nwrong": 2.0},
                "actual_iterations": 20,
                "experiment_name": "x",
            }
        ],
        "out_of_bounds": {"count": 1, "okay": "false"},
        "average_bus_bandwidth": {"bandwidth": 355.4, "okay": "unchecked"},
        "errors": [],
    }
    result = parse_nccl_tests(json.dumps(doc))
    assert result["collective"] == "all_reduce" and result["ranks"] == 8
    row = result["rows"][0]
    assert row["root"] == -1 and row["in_place"]["wrong"] == 2 and row["out_of_place"]["busbw"] == 356.04
    assert result["out_of_bounds"] == 1 and result["complete"] is True and result["ok"] is False
    assert result["avg_busbw_check"] is None  # "unchecked": no -C given
    doc["average_bus_bandwidth"]["okay"] = "false"  # jsonBool() writes the strings "true"/"false"
    assert parse_nccl_tests(json.dumps(doc))["avg_busbw_check"] == "FAILED"


def test_empty_input() -> None:
    result = parse_nccl_tests("")
    assert result["rows"] == [] and result["complete"] is False and result["ok"] is False


def test_old_error_column_with_checking_off() -> None:
    result = parse("old_error_na_8xa100_superbench.txt")
    assert result["ranks"] == 8 and len(result["rows"]) == 34  # 0, 0, then 4 B .. 8 GiB doubling
    row = row_of(result, 1073741824)
    assert row["out_of_place"]["busbw"] == pytest.approx(230.29)
    assert row["in_place"] == {
        "time_us": 8176.5,
        "algbw": 131.32,
        "busbw": 229.81,
        "wrong": None,
        "error": None,
    }
    assert result["ok"] is True and result["avg_busbw"] == pytest.approx(68.4048)


def test_per_iteration_and_timestamp_columns_are_read_by_name() -> None:
    """Header and row in the layout that writeResultHeader/writeBenchmarkLineBody print with
    per-iteration timing and timestamps on (NVIDIA/nccl-tests src/util.cu); built here, not captured."""
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max"
        "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%           timestamp\n"
    )
    row = (
        "  1073741824     268435456  bfloat16     sum      -1  4523.62  237.36  356.04       0  4400.00  4600.00"
        "  4590.00     1.20  4539.85  236.51  354.77       3  4410.00  4610.00  4600.00     1.10  2025-06-01 10:00:00\n"
    )
    (parsed,) = parse_nccl_tests(header + row)["rows"]
    assert parsed["out_of_place"] == {
        "time_us": 4523.62,
        "algbw": 237.36,
        "busbw": 356.04,
        "wrong": 0,
        "error": None,
    }
    assert parsed["in_place"]["busbw"] == 354.77 and parsed["in_place"]["wrong"] == 3


def test_two_node_h100_pass() -> None:
    result = parse("two_node_h100_16ranks_ok.txt")
    assert result["ranks"] == 16 and {d["host"] for d in result["devices"]} == {
        "ztan-mig-235z",
        "ztan-mig-gq73",
    }
    assert len(result["rows"]) == 31
    assert row_of(result, 8589934592)["out_of_place"]["busbw"] == pytest.approx(338.82)
    assert row_of(result, 1073741824)["in_place"]["time_us"] == pytest.approx(6737.4)
    assert (
        result["complete"] is True and result["ok"] is True and result["avg_busbw"] == pytest.approx(70.742)
    )


# ---- captures added in the second pass (sources in SOURCES.md) ----


def test_old_alltoall_prints_blank_redop_under_a_redop_header() -> None:
    result = parse("old_alltoall_blank_redop_v100_ib.txt")
    assert [row["size"] for row in result["rows"]] == [268435456, 536870912]
    first = result["rows"][0]
    assert first["count"] == 1048576 and first["type"] == "float" and first["redop"] is None
    assert first["out_of_place"] == {
        "time_us": 520935.0,
        "algbw": 0.52,
        "busbw": 0.51,
        "wrong": None,
        "error": 0.0,
    }
    assert first["in_place"]["error"] == 1.0 and first["in_place"]["time_us"] == 519562.0
    assert result["complete"] is True and result["avg_busbw"] == pytest.approx(0.507636)


def test_old_allreduce_error_column_without_root() -> None:
    result = parse("old_allreduce_error_2e06_v100_ib.txt")
    last = row_of(result, 536870912)
    assert last["redop"] == "sum" and last["root"] is None
    assert last["out_of_place"]["busbw"] == 4.32 and last["out_of_place"]["error"] == pytest.approx(2e-06)
    assert result["ok"] is True and result["avg_busbw"] == pytest.approx(4.32178)


def test_rows_without_any_header_then_footer() -> None:
    result = parse("old_no_header_rows_footer_nccl264.txt")
    assert len(result["rows"]) == 12 and result["rows"][0]["size"] == 65536
    last = row_of(result, 134217728)
    assert last["redop"] is None and last["root"] is None and last["type"] == "float"
    assert last["out_of_place"]["time_us"] == 3298.6 and last["in_place"]["busbw"] == 21.86
    assert result["complete"] is True and result["avg_busbw"] == pytest.approx(6.6972)


def test_broadcast_with_root_na_errors_and_warn_lines() -> None:
    result = parse("broadcast_root_na_warn_interleaved_cut.txt")
    assert result["collective"] == "broadcast" and result["ranks"] == 2 and result["validation"] == 0
    (row,) = result["rows"]
    assert row["size"] == 8 and row["root"] == 0 and row["redop"] is None
    assert row["out_of_place"]["time_us"] == 45.82 and row["out_of_place"]["error"] is None
    assert len(result["errors"]) == 2 and all("NCCL WARN" in e for e in result["errors"])
    assert result["complete"] is False and result["ok"] is False


def test_row_cut_by_the_paste_is_not_read() -> None:
    result = parse("sendrecv_a40_2node_inplace_na_cut.txt")
    assert [row["size"] for row in result["rows"]] == [256, 512, 1024, 2048, 4096]
    assert result["rows"][0]["in_place"]["wrong"] is None and result["rows"][0]["out_of_place"]["wrong"] == 0
    assert result["ranks"] == 2 and result["complete"] is False


def test_unindented_rows_and_single_spaced_rank_lines() -> None:
    result = parse("rtx4090_unindented_rows_cut.txt")
    assert result["ranks"] == 3 and result["devices"][2]["bus"] == "0x49"
    assert result["devices"][0]["name"] == "NVIDIA GeForce RTX 4090"
    assert [row["size"] for row in result["rows"]] == [8, 16, 32]
    assert row_of(result, 8)["in_place"]["time_us"] == 190.2
    assert result["complete"] is False


def test_indented_mpirun_tags_alltoall() -> None:
    result = parse("alltoall_mpirun_tag_indented_cut.txt")
    assert len(result["rows"]) == 9 and result["rows"][0]["size"] == 2048
    last = row_of(result, 524288)
    assert last["redop"] == "none" and last["root"] == -1
    assert last["out_of_place"]["busbw"] == 2.31 and last["in_place"]["wrong"] is None
    assert result["complete"] is False


def test_tagged_destroy_lines_and_half_footer() -> None:
    result = parse("mpirun_tag_destroy_info_footer_cut.txt")
    assert result["rows"] == [] and result["out_of_bounds"] == 0 and result["errors"] == []
    assert result["complete"] is False and result["ok"] is False


def test_version_2_18_mpi_binary_with_launcher_chatter() -> None:
    result = parse("v2180_allgather_mpi_x11_chatter_rtx5090.txt")
    assert result["version"] == "2.18.0" and result["binary"] == "all_gather_perf_mpi"
    assert result["collective"] == "all_gather" and result["ranks"] == 2 and result["validation"] == 1
    assert result["devices"][1]["bus"] == "0000:02:00" and result["devices"][1]["pid"] == 2989376
    last = row_of(result, 134217728)
    assert last["out_of_place"]["time_us"] == 64380.9 and last["in_place"]["busbw"] == 1.10
    assert result["ok"] is True and result["avg_busbw"] == pytest.approx(1.27827)


def test_checking_off_prints_na_on_both_sides() -> None:
    result = parse("gke_a3_allgather_c0_na_indented.txt")
    assert len(result["rows"]) == 10
    last = row_of(result, 536870912)
    assert last["out_of_place"]["wrong"] is None and last["in_place"]["wrong"] is None
    assert last["in_place"]["busbw"] == 71.35
    assert result["ok"] is True and result["avg_busbw"] == pytest.approx(30.9622)


def test_single_process_eight_gpus() -> None:
    result = parse("h100_8gpu_single_process_nvls_ok.txt")
    assert result["ranks"] == 8 and {d["pid"] for d in result["devices"]} == {295203}
    assert row_of(result, 4294967296)["in_place"]["busbw"] == 476.53
    assert result["ok"] is True and result["avg_busbw"] == pytest.approx(439.369)


def test_padded_srun_labels_two_nodes() -> None:
    result = parse("srun_label_padded_2node_h100_c0.txt")
    assert result["ranks"] == 16 and result["validation"] == 0
    assert result["devices"][15]["host"] == "node007" and result["devices"][15]["bus"] == "0xc1"
    assert len(result["rows"]) == 11
    assert row_of(result, 8589934592)["out_of_place"]["busbw"] == 155.57
    assert result["complete"] is True and result["avg_busbw"] == pytest.approx(142.735)


def test_log_of_three_runs_counts_runs_and_keeps_every_row() -> None:
    result = parse("v2180_allgather_mpi_three_runs.txt")
    assert result["runs"] == 3 and len(result["rows"]) == 24
    assert result["rows"][8]["size"] == 1048576 and result["rows"][8]["out_of_place"]["time_us"] == 4468.53
    assert result["out_of_bounds"] == 0 and result["avg_busbw"] == pytest.approx(1.54607)  # the last run's
    assert result["devices"][0]["pid"] == 2989945 and result["ok"] is True


def test_a_failed_footer_in_an_earlier_run_is_not_hidden_by_a_later_one() -> None:
    """Derived from two captures: a failing run followed by a passing one in one log."""
    text = (DATA / "old_no_root_no_redop_failed.txt").read_text() + (
        DATA / "old_broadcast_root_no_redop.txt"
    ).read_text()
    result = parse_nccl_tests(text)
    assert result["runs"] == 2 and result["out_of_bounds"] == 4 and result["ok"] is False


def test_mpich_prepend_rank_tags_are_stripped() -> None:
    """MPICH/Intel MPI `-prepend-rank` tags every line with "[rank] "; built from a real capture's lines."""
    lines = (DATA / "h100_8gpu_single_process_nvls_ok.txt").read_text().splitlines()
    result = parse_nccl_tests("\n".join("[0] " + line for line in lines))
    assert result["ranks"] == 8 and len(result["rows"]) == 6 and result["complete"] is True
    assert row_of(result, 4294967296)["in_place"]["busbw"] == 476.53 and result["ok"] is True


def test_command_line_names_the_collective_when_the_header_is_missing() -> None:
    result = parse("sendrecv_8xa100_command_echo_no_footer.txt")
    assert result["binary"] == "sendrecv_perf" and result["collective"] == "sendrecv"
    assert [row["size"] for row in result["rows"]] == [134217728, 268435456, 536870912, 1073741824]
    assert row_of(result, 1073741824)["in_place"] == {
        "time_us": 5490.5,
        "algbw": 195.56,
        "busbw": 195.56,
        "wrong": None,
        "error": None,
    }
    assert result["complete"] is False and result["ok"] is False


def test_rows_of_several_ops_without_header() -> None:
    result = parse("redop_max_min_rows_excerpt_cut.txt")
    assert [row["redop"] for row in result["rows"]] == ["max"] * 6 + ["min"] * 5
    first_min = result["rows"][6]
    assert first_min["size"] == 196608 and first_min["count"] == 49152 and first_min["root"] == -1
    assert first_min["out_of_place"]["busbw"] == 2.94 and first_min["in_place"]["wrong"] == 0
    assert result["complete"] is False


def test_old_reduce_has_redop_and_root_with_error_column() -> None:
    result = parse("old_reduce_redop_root_error_elided_gtx1080.txt")
    assert result["ranks"] == 2 and [row["size"] for row in result["rows"]][:3] == [8, 16, 32]
    last = row_of(result, 134217728)
    assert last["redop"] == "sum" and last["root"] == 0
    assert last["out_of_place"] == {
        "time_us": 87680.0,
        "algbw": 1.53,
        "busbw": 1.53,
        "wrong": None,
        "error": 0.0,
    }
    assert last["in_place"]["busbw"] == 1.48 and len(result["rows"]) == 6
    assert result["ok"] is True and result["avg_busbw"] == pytest.approx(0.716373)


def test_footer_pasted_without_its_hash_is_a_failed_run() -> None:
    result = parse("old_allgather_4g_footer_without_hash_failed.txt")
    assert result["out_of_bounds"] == 2 and result["avg_busbw"] == pytest.approx(128.942)
    assert result["complete"] is True and result["ok"] is False
    assert [row["size"] for row in result["rows"]] == [4294967296]
    assert result["rows"][0]["out_of_place"]["error"] == 1.0
