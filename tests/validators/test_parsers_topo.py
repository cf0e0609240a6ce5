"""nvidia-smi topo -m parser on captured outputs (tests/data/nvidia-smi-topo, sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validators.parsers.topo import parse_nvidia_smi_topo

DATA = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi-topo"
CAPTURES = sorted(DATA.glob("*.txt"))
KINDS = {"PIX", "PXB", "PHB", "NODE", "SYS", "SOC"}


def parse(name: str) -> dict:
    return parse_nvidia_smi_topo((DATA / name).read_text())


def test_every_capture_is_listed_in_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    for path in CAPTURES:
        assert f"`{path.name}`" in sources


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_matrix_is_complete_and_symmetric(path: Path) -> None:
    result = parse_nvidia_smi_topo(path.read_text())
    json.dumps(result)
    assert result["error"] is None
    gpus = result["gpus"]
    for a in gpus:
        assert set(result["links"][a]) == set(gpus) - {a}
        for b, kind in result["links"][a].items():
            assert kind == result["links"][b][a]
            assert kind in KINDS or kind.startswith("NV")
        assert set(result["nic_links"][a]) == set(result["nics"])


def test_pcie_only_pair_with_legend() -> None:
    result = parse("topo_2x1080ti_phb_legend.txt")
    assert result["gpus"] == ["GPU0", "GPU1"] and result["nics"] == []
    assert result["links"]["GPU0"]["GPU1"] == "PHB"
    assert result["affinity"]["GPU1"] == {"cpu_affinity": "0-11", "numa_affinity": None, "gpu_numa_id": None}


def test_a100_nvlink_with_nic_legend() -> None:
    result = parse("topo_8xa100_nv12_17nics_legend.txt")
    assert len(result["gpus"]) == 8 and len(result["nics"]) == 17
    assert result["nics"][0] == "mlx5_2" and result["nics"][-1] == "mlx5_bond_0"
    assert all(kind == "NV12" for row in result["links"].values() for kind in row.values())
    assert result["nic_links"]["GPU2"]["mlx5_6"] == "PXB"
    assert result["nic_links"]["GPU7"]["mlx5_bond_0"] == "SYS"
    assert result["affinity"]["GPU5"]["cpu_affinity"] == "0-103"


def test_h20_nv18_with_unnamed_nics() -> None:
    result = parse("topo_8xh20_nv18_8nics_no_legend.txt")
    assert result["links"]["GPU3"]["GPU6"] == "NV18"
    assert result["nics"] == [f"NIC{i}" for i in range(8)]
    assert result["nic_links"]["GPU0"]["NIC7"] == "PIX" and result["nic_links"]["GPU4"]["NIC3"] == "PIX"
    assert result["affinity"]["GPU4"] == {"cpu_affinity": "64-127", "numa_affinity": "1", "gpu_numa_id": None}


# ---- edge handling (inputs built here, not captures) ----


def test_older_driver_names_nics_in_the_header() -> None:
    text = (
        "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
        "GPU0\t X \tNV2\tPIX\t0-19\n"
        "GPU1\tNV2\t X \tSYS\t0-19\n"
        "mlx5_0\tPIX\tSYS\t X \n"
    )
    result = parse_nvidia_smi_topo(text)
    assert result["nics"] == ["mlx5_0"] and result["links"]["GPU1"]["GPU0"] == "NV2"
    assert result["nic_links"]["GPU0"]["mlx5_0"] == "PIX"


def test_not_a_matrix() -> None:
    assert parse_nvidia_smi_topo("NVIDIA-SMI has failed because it couldn't communicate")["error"]


# ---- captures added in the second pass (sources in SOURCES.md) ----


def test_raw_tabs_keep_an_empty_cpu_affinity_cell() -> None:
    result = parse("topo_8xh100_nv18_6nics_empty_cpu_affinity.txt")
    assert result["nics"] == [f"mlx5_{i}" for i in range(6)]
    assert all(kind == "NV18" for kind in result["links"]["GPU5"].values())
    assert result["nic_links"]["GPU0"] == {
        "mlx5_0": "PIX",
        "mlx5_1": "PIX",
        "mlx5_2": "NODE",
        "mlx5_3": "NODE",
        "mlx5_4": "NODE",
        "mlx5_5": "NODE",
    }
    assert result["affinity"]["GPU0"] == {"cpu_affinity": None, "numa_affinity": "0", "gpu_numa_id": None}
    assert result["affinity"]["GPU4"] == {"cpu_affinity": "1", "numa_affinity": "1", "gpu_numa_id": None}


def test_consumer_pair_with_gpu_numa_id_after_double_tab() -> None:
    result = parse("topo_2xrtx5090_phb_raw_tabs.txt")
    assert result["links"] == {"GPU0": {"GPU1": "PHB"}, "GPU1": {"GPU0": "PHB"}} and result["nics"] == []
    assert result["affinity"]["GPU1"] == {"cpu_affinity": "0-63", "numa_affinity": "0", "gpu_numa_id": None}


def test_old_header_names_rdma_devices() -> None:
    result = parse("topo_2xa100_pcie_sys_mlx5_header.txt")
    assert result["nics"] == ["mlx5_0", "mlx5_1"] and result["links"]["GPU0"] == {"GPU1": "SYS"}
    assert result["nic_links"]["GPU0"] == {"mlx5_0": "NODE", "mlx5_1": "SYS"}
    assert result["affinity"]["GPU1"] == {"cpu_affinity": "64-127", "numa_affinity": "1", "gpu_numa_id": None}


def test_power9_nv3_pairs() -> None:
    result = parse("topo_4xv100_power9_nv3_mlx5_header.txt")
    assert result["links"]["GPU0"] == {"GPU1": "NV3", "GPU2": "SYS", "GPU3": "SYS"}
    assert result["links"]["GPU2"]["GPU3"] == "NV3"
    assert result["nic_links"]["GPU3"] == {
        "mlx5_0": "SYS",
        "mlx5_1": "SYS",
        "mlx5_2": "NODE",
        "mlx5_3": "NODE",
    }
    assert result["affinity"]["GPU2"]["numa_affinity"] == "8"


def test_header_without_its_leading_tab() -> None:
    result = parse("topo_2xrtx5090_vllm_env_header_unindented.txt")
    assert result["gpus"] == ["GPU0", "GPU1"] and result["nics"] == []
    assert result["links"] == {"GPU0": {"GPU1": "NODE"}, "GPU1": {"GPU0": "NODE"}}
    assert result["affinity"]["GPU0"] == {"cpu_affinity": "0-47", "numa_affinity": "0", "gpu_numa_id": None}
