"""nvidia-smi nvlink --status parser on captured outputs (tests/data/nvlink, sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validators.parsers.nvlink import parse_nvlink_status

DATA = Path(__file__).resolve().parents[1] / "data" / "nvlink"
CAPTURES = sorted(DATA.glob("*.txt"))


def parse(name: str) -> dict:
    return parse_nvlink_status((DATA / name).read_text())


def test_every_capture_is_listed_in_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    for path in CAPTURES:
        assert f"`{path.name}`" in sources


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_properties_hold_on_every_capture(path: Path) -> None:
    text = path.read_text()
    result = parse_nvlink_status(text)
    json.dumps(result)
    assert result["error"] is None
    assert sum(len(g["links"]) for g in result["gpus"]) == text.count("Link ")
    for gpu in result["gpus"]:
        assert gpu["links_up"] + len(gpu["inactive"]) == len(gpu["links"])


def test_bridged_h100_pcie_has_six_inactive_links_per_gpu() -> None:
    result = parse("h100_pcie_2gpus_inactive_links_prompt_indented.txt")
    assert [(g["index"], g["name"], g["links_up"], g["inactive"]) for g in result["gpus"]] == [
        (0, "NVIDIA H100 PCIe", 12, [4, 5, 10, 11, 16, 17]),
        (1, "NVIDIA H100 PCIe", 12, [4, 5, 10, 11, 16, 17]),
    ]
    assert result["gpus"][0]["uuid"] == "GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9"
    assert result["gpus"][0]["links"]["0"] == 26.562 and result["gpus"][0]["links"]["4"] is None


def test_a100_twelve_links_and_an_elided_tail() -> None:
    result = parse("a100_sxm4_12links_elided.txt")
    assert [(g["index"], g["links_up"], g["max_gbps"]) for g in result["gpus"]] == [
        (0, 12, 25.0),
        (1, 12, 25.0),
        (2, 1, 25.0),
    ]


def test_v100_inactive_links_and_elided_uuid() -> None:
    (gpu,) = parse("v100_sxm2_inactive_elided.txt")["gpus"]
    assert (gpu["index"], gpu["name"], gpu["inactive"], gpu["max_gbps"]) == (
        3,
        "Tesla V100-SXM2-32GB",
        [3, 5],
        25.781,
    )


def test_h100_elision_keeps_only_printed_links() -> None:
    (gpu,) = parse("h100_sxm_ml_engineering_elided.txt")["gpus"]
    assert gpu["links"] == {"0": 26.562, "17": 26.562}


# ---- edge handling (inputs built here, not captures) ----


def test_other_subcommands_and_failures() -> None:
    text = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n\t Link 0, P2P is supported: true\n\t Link 1: Replay Errors: 0\n\t Link 2: 0 GB/s\n"
    (gpu,) = parse_nvlink_status(text)["gpus"]
    assert gpu["links"] == {"2": 0.0} and gpu["inactive"] == [2] and gpu["links_up"] == 0
    failed = parse_nvlink_status(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    )
    assert failed["gpus"] == [] and failed["error"].startswith("NVIDIA-SMI has failed")
    assert parse_nvlink_status("")["error"] == "nvidia-smi nvlink printed no GPU"
