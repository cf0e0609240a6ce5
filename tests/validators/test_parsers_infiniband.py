"""ibstat / ibstatus parsers on captured outputs (tests/data/ibstat, tests/data/ibstatus; SOURCES.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from validators.parsers.infiniband import parse_ibstat, parse_ibstatus

DATA = Path(__file__).resolve().parents[1] / "data"
CAPTURES = [(parse_ibstat, p) for p in sorted((DATA / "ibstat").glob("*.txt"))] + [
    (parse_ibstatus, p) for p in sorted((DATA / "ibstatus").glob("*.txt"))
]


def ports(result: dict) -> list[tuple]:
    return [
        (p["device"], p["port"], p["state"], p["physical_state"], p["rate_gbps"], p["link_layer"])
        for p in result["ports"]
    ]


def test_every_capture_is_listed_in_sources() -> None:
    for _, path in CAPTURES:
        assert f"`{path.name}`" in (path.parent / "SOURCES.md").read_text(), path


@pytest.mark.parametrize(("parse", "path"), CAPTURES, ids=lambda v: getattr(v, "name", ""))
def test_properties_hold_on_every_capture(parse, path: Path) -> None:
    text = path.read_text()
    result = parse(text)
    json.dumps(result)
    marker = r"^\s*Port \d+:" if parse is parse_ibstat else r"^Infiniband device "
    assert len(result["ports"]) == len(re.findall(marker, text, re.MULTILINE)) and result["error"] is None
    for port in result["ports"]:
        assert port["state"] in ("Active", "Down") and port["physical_state"] in ("LinkUp", "Disabled")
        assert port["rate_gbps"] and port["link_layer"] in ("InfiniBand", "Ethernet")


def test_eight_active_ports_and_a_vanished_ninth() -> None:
    result = parse_ibstat((DATA / "ibstat" / "gpud_a100_8ports_ibpanic_exit255.txt").read_text())
    assert ports(result) == [(f"mlx5_{i}", 1, "Active", "LinkUp", 200.0, "InfiniBand") for i in range(8)]
    assert result["errors"] == [
        "ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"
    ]
    assert result["cas"][0] == {"name": "mlx5_0", "type": "MT4124", "firmware": "20.41.1000", "ports": 1}


def test_annotated_paste_of_down_ethernet_ports() -> None:
    result = parse_ibstat((DATA / "ibstat" / "cx6_2ports_ethernet_down_disabled_annotated.txt").read_text())
    assert ports(result) == [(f"mlx5_{i}", 1, "Down", "Disabled", 200.0, "Ethernet") for i in range(2)]


def test_ibstatus_tab_layout_reads_rate_width_and_speed() -> None:
    result = parse_ibstatus((DATA / "ibstatus" / "cuml_wiki_4x_edr_infiniband_active.txt").read_text())
    assert ports(result) == [(f"mlx5_{i}", 1, "Active", "LinkUp", 100.0, "InfiniBand") for i in range(4)]
    assert {(p["width"], p["speed"]) for p in result["ports"]} == {("4X", "EDR")}


def test_ibstatus_one_port_down() -> None:
    result = parse_ibstatus((DATA / "ibstatus" / "edr_ethernet_one_down_one_active.txt").read_text())
    assert ports(result) == [
        ("mlx5_0", 1, "Down", "Disabled", 100.0, "Ethernet"),
        ("mlx5_1", 1, "Active", "LinkUp", 100.0, "Ethernet"),
    ]
    spaced = parse_ibstatus((DATA / "ibstatus" / "cx6_hdr_ethernet_down_disabled.txt").read_text())
    assert [(p["rate_gbps"], p["speed"]) for p in spaced["ports"]] == [(200.0, "HDR"), (200.0, "HDR")]


def test_nothing_readable_is_an_error() -> None:
    assert parse_ibstat("")["error"] == "no InfiniBand port in the output"
    assert parse_ibstatus("ibpanic: [9] main: no IB devices found\n")["error"].startswith("ibpanic:")
