"""Parsers against outputs as they really arrive (issue 22): NCCL log lines inside table rows,
terminal escape codes, lines indented by a paste, separators lost. Each is either parsed right or
refused with its line named, never read with its columns shifted.

The captures are real (tests/data/*/SOURCES.md). Where no public capture shows a shape, the test
derives it from a real capture by the one transformation the shape is (indent every line, colour
every line, expand tabs, run two columns together) and says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import FakeRunner, captured, gpu_config, make_context

from validators.checks.nccl import NcclSingleNode
from validators.parsers import PARSERS
from validators.parsers.nccl_tests import parse_nccl_tests
from validators.parsers.topo import parse_nvidia_smi_topo
from validators.suite import run_check

DATA = Path(__file__).resolve().parents[1] / "data"


def nccl(name: str) -> str:
    return captured("nccl-tests", name)


def split_row_run() -> str:
    """NVIDIA/nccl issue 1453's run, its two excerpts in order (SOURCES.md)."""
    return nccl("mpich_prepend_rank_nvls_info_splits_row_cut.txt") + nccl(
        "mpich_prepend_rank_row_continuation_excerpt_cut.txt"
    )


def sides(row: dict) -> tuple:
    o, i = row["out_of_place"], row["in_place"]
    return (
        o["time_us"],
        o["algbw"],
        o["busbw"],
        o["wrong"],
        i["time_us"],
        i["algbw"],
        i["busbw"],
        i["wrong"],
    )


# -- 1. NCCL log lines inside a row ------------------------------------------------------------------


def test_a_row_cut_by_nccl_info_lines_is_rejoined_from_its_pieces() -> None:
    """Before: the 524288 B row came back with no time, algbw or busbw (judged as 0 GB/s), and its
    continuation line was dropped."""
    result = parse_nccl_tests(split_row_run())
    row = next(r for r in result["rows"] if r["size"] == 524288)
    assert (row["count"], row["type"], row["redop"], row["root"]) == (131072, "float", "sum", -1)
    assert sides(row) == (366.5, 1.43, 2.74, 0, 340.8, 1.54, 2.95, 0)
    assert all(r["out_of_place"]["busbw"] is not None for r in result["rows"])
    assert [r["size"] for r in result["rows"]] == [32768 << i for i in range(15)]


def test_mpich_rank_tags_inside_a_row_do_not_eat_the_wrong_counts() -> None:
    """Hydra's -prepend-rank tags every printf piece: `0[0]` is the #wrong 0 followed by the next
    piece's tag. Before: every out-of-place #wrong read None (the token `0[0]`) and root None."""
    result = parse_nccl_tests(split_row_run())
    first = result["rows"][0]
    assert sides(first) == (159.4, 0.21, 0.39, 0, 201.8, 0.16, 0.31, 0)
    assert first["root"] == -1


def test_the_row_the_excerpt_cuts_is_refused_with_its_line() -> None:
    result = parse_nccl_tests(split_row_run())
    (refused,) = result["refused"]
    assert refused["line"] == 23 and refused["size"] == 1 << 30
    assert refused["text"] == "1073741824     2684"


def test_a_split_row_is_judged_on_its_figures_never_as_zero() -> None:
    """The check judges the rejoined row; a row it cannot rejoin at the judged size fails, naming the line."""
    cfg = gpu_config(
        thresholds={"nccl.all_reduce.1node.busbw_gbps": 1.0, "nccl.all_reduce.1node.message_bytes": 524288}
    )
    cfg["nccl"] = dict(cfg["nccl"], collectives=["all_reduce"])
    bin_ = "/opt/nccl-tests/build/all_reduce_perf"
    nvsmi = (0, captured("nvidia-smi", "q_550_a10_pcie_gen1.txt"), "")
    head_only = nccl("mpich_prepend_rank_nvls_info_splits_row_cut.txt")
    runner = FakeRunner({("nvidia-smi", "-q", "-x"): nvsmi, (bin_,): (0, head_only, "")})
    result = run_check(NcclSingleNode(), make_context(cfg, runner))
    assert result.status == "fail"
    assert (
        "all_reduce: line 5 not read (row cut short (5 columns): the output ends before the rest of it)"
        in (result.summary)
    )
    assert result.metrics.get("all_reduce.busbw") is None, "no figure made up for the row that was not read"


# -- 2. terminal escape codes -------------------------------------------------------------------------


def test_topo_header_underlined_by_the_driver_is_read() -> None:
    """Driver 590.48.01 underlines the header even into a file (SOURCES.md). Before: no GPU found
    ('no complete GPU matrix')."""
    text = captured("nvidia-smi-topo", "topo_1xh100_590_ansi_underlined_header.txt")
    assert "\x1b[4m" in text
    result = parse_nvidia_smi_topo(text)
    assert result["error"] is None
    assert result["gpus"] == ["GPU0"]
    assert result["affinity"]["GPU0"] == {"cpu_affinity": "0-19", "numa_affinity": "0", "gpu_numa_id": None}


@pytest.mark.parametrize("tool", ["nccl-tests", "nvidia-smi", "nvidia-smi-topo", "gpu-burn", "nvlink"])
def test_colour_codes_around_every_line_change_nothing(tool: str) -> None:
    """Derived: every line of a real capture wrapped in SGR colour codes, as a terminal logger keeps them."""
    name = {
        "nccl-tests": "h100_8gpu_single_process_nvls_ok.txt",
        "nvidia-smi": "q_545_h100_sxm_healthy.txt",
        "nvidia-smi-topo": "topo_8xh100_nv18_6nics_empty_cpu_affinity.txt",
        "gpu-burn": "faulty_16gpus_exit0.txt",
        "nvlink": sorted(p.name for p in (DATA / "nvlink").glob("*.txt"))[0],
    }[tool]
    plain = captured(tool, name)
    coloured = "".join(f"\x1b[1;32m{line}\x1b[0m\n" for line in plain.splitlines())
    assert PARSERS[tool](coloured) == PARSERS[tool](plain)


# -- 3. lines indented by a paste ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "gke_a3_allgather_c0_na_indented.txt",
        "alltoall_mpirun_tag_indented_cut.txt",
        "mpirun_prefixed_eks_p5.txt",
    ],
)
def test_real_indented_pastes_read_every_row(name: str) -> None:
    result = parse_nccl_tests(nccl(name))
    assert result["rows"], name
    assert all(r["out_of_place"]["busbw"] is not None for r in result["rows"])


def test_indenting_a_capture_changes_nothing() -> None:
    """Derived: a real capture with every line indented by 6 blanks (a markdown list)."""
    plain = nccl("two_node_h100_16ranks_ok.txt")
    indented = "".join("      " + line + "\n" for line in plain.splitlines())
    assert parse_nccl_tests(indented) == parse_nccl_tests(plain)
    topo = captured("nvidia-smi-topo", "topo_8xa100_nv12_17nics_legend.txt")
    moved = parse_nvidia_smi_topo("".join("    " + line + "\n" for line in topo.splitlines()))
    assert moved["links"] == parse_nvidia_smi_topo(topo)["links"]


# -- 4. separators lost -------------------------------------------------------------------------------


def glue(text: str, size: int, between: str) -> tuple[str, int]:
    """Derived: on the row of ``size``, run two neighbouring columns together (no blank between them)."""
    k = {"size+count": 0, "time+algbw": 5}[between]  # index of the first of the two tokens
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        spans = [m.span() for m in re.finditer(r"\S+", line)]
        if spans and line[slice(*spans[0])] == str(size):
            lines[n - 1] = line[: spans[k][1]] + line[spans[k + 1][0] :]
            return "\n".join(lines) + "\n", n
    raise AssertionError(size)


@pytest.mark.parametrize("between", ["size+count", "time+algbw"])
def test_columns_run_together_are_refused_never_shifted(between: str) -> None:
    """Before: a row short of a column was read from the right, so its size took the count's digits
    and its type the redop, or it vanished without a word."""
    plain = nccl("two_node_h100_16ranks_ok.txt")
    size = 1 << 30
    text, line = glue(plain, size, between)
    result = parse_nccl_tests(text)
    kept = {r["size"] for r in result["rows"]}
    assert size not in kept
    assert kept == {r["size"] for r in parse_nccl_tests(plain)["rows"]} - {size}
    (refused,) = result["refused"]
    assert refused["line"] == line and refused["why"]
    for row in result["rows"]:
        assert row["type"] == "float" and row["redop"] == "sum"


def test_topo_rows_whose_tabs_were_expanded_lose_the_empty_cell_and_are_refused() -> None:
    """Derived: the Della H100 capture (GPU0-3's CPU Affinity cell is empty, `NODE\\t\\t0\\t\\tN/A`)
    with its tabs expanded to blanks. Before: GPU0's CPU affinity read '0' (the NUMA node) and its NUMA
    affinity 'N/A': the columns shifted in silence."""
    text = captured("nvidia-smi-topo", "topo_8xh100_nv18_6nics_empty_cpu_affinity.txt")
    result = parse_nvidia_smi_topo(text.expandtabs(8))
    assert result["affinity"]["GPU0"] == {"cpu_affinity": None, "numa_affinity": None, "gpu_numa_id": None}
    assert result["affinity"]["GPU4"]["cpu_affinity"] == "1"  # a row with every cell still placeable
    refused_gpus = [r["text"].split()[0] for r in result["refused"]]
    assert refused_gpus == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert "no tabs to place an empty one" in result["refused"][0]["why"]
    assert result["links"] == parse_nvidia_smi_topo(text)["links"]  # the matrix itself is intact


def test_topo_row_short_of_cells_is_named_in_the_error() -> None:
    text = captured("nvidia-smi-topo", "topo_8xh100_nv18_6nics_empty_cpu_affinity.txt")  # raw tabs
    lines = text.splitlines()
    n = next(i for i, line in enumerate(lines) if line.startswith("GPU3"))
    lines[n] = "\t".join(lines[n].split("\t")[:5])  # derived: a row cut after four cells
    result = parse_nvidia_smi_topo("\n".join(lines) + "\n")
    assert result["error"].startswith(f"no complete GPU matrix in nvidia-smi topo -m output (line {n + 1}: ")
