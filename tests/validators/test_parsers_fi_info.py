"""fi_info parser on captured outputs (tests/data/fi-info, sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validators.parsers.fi_info import parse_fi_info

DATA = Path(__file__).resolve().parents[1] / "data" / "fi-info"
CAPTURES = sorted(DATA.glob("*.txt"))


def parse(name: str) -> dict:
    return parse_fi_info((DATA / name).read_text())


def test_every_capture_is_listed_in_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    for path in CAPTURES:
        assert f"`{path.name}`" in sources


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_properties_hold_on_every_capture(path: Path) -> None:
    text = path.read_text()
    result = parse_fi_info(text)
    json.dumps(result)
    assert len(result["providers"]) == text.count("provider: ")
    assert result["efa_device_count"] == len(result["efa_devices"])
    assert (result["error"] is None) == bool(result["providers"])


def test_p4d_has_four_efa_devices() -> None:
    result = parse("p4d_4_efa_rdm.txt")
    assert result["efa_device_count"] == 4
    assert result["efa_devices"] == ["rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"]
    assert result["providers"][0] == {
        "provider": "efa",
        "fabric": "EFA-fe80::10d8:baff:fec9:6c1",
        "domain": "rdmap16s27-rdm",
        "version": "111.20",
        "type": "FI_EP_RDM",
        "protocol": "FI_PROTO_EFA",
    }


def test_one_device_seen_through_three_providers() -> None:
    result = parse("efa_rdm_dgrm_rxd_sagemaker_doc.txt")
    assert result["efa_devices"] == ["efa_0"] and len(result["providers"]) == 3
    assert result["providers"][2]["provider"] == "efa;ofi_rxd"
    assert result["rdm_domains"] == ["efa_0-rdm"]


def test_efa_direct_fabric_counts_once() -> None:
    result = parse("efa_direct_libfabric2.txt")
    assert [p["fabric"] for p in result["providers"]] == ["efa-direct", "efa", "efa"]
    assert result["efa_devices"] == ["rdmap47s0"] and result["domains"] == ["rdmap47s0-dgrm", "rdmap47s0-rdm"]


def test_no_efa_provider() -> None:
    result = parse("not_found_61.txt")
    assert result["providers"] == [] and result["efa_device_count"] == 0
    assert result["error"].startswith("fi_getinfo: -61 (FI_ENODATA")


# ---- edge handling (inputs built here, not captures) ----


def test_mpirun_tagged_output() -> None:
    text = "[1,0]<stdout>:provider: efa\n[1,0]<stdout>:    fabric: efa\n[1,0]<stdout>:    domain: rdmap197s0-rdm\n"
    assert parse_fi_info(text)["efa_devices"] == ["rdmap197s0"]


def test_2020_fabric_named_by_ipv6_address() -> None:
    result = parse("efa_2020_efa0_fabric_ipv6_rxd.txt")
    assert [p["fabric"] for p in result["providers"]] == ["EFA-fe80::39:beff:fe6e:c23"] * 3
    assert [p["provider"] for p in result["providers"]] == ["efa", "efa", "efa;ofi_rxd"]
    assert result["providers"][2]["protocol"] == "FI_PROTO_RXD" and result["providers"][2]["version"] == "1.0"
    assert result["rdm_domains"] == ["efa_0-rdm"] and result["efa_devices"] == ["efa_0"]
    assert result["efa_device_count"] == 1 and result["error"] is None
