"""Xid kernel-log parser on captured lines (tests/data/xid, sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validators.parsers.xid import classify_xid, parse_xid

DATA = Path(__file__).resolve().parents[1] / "data" / "xid"
CAPTURES = sorted(DATA.glob("*.txt"))


def parse(name: str) -> dict:
    return parse_xid((DATA / name).read_text())


def test_every_capture_is_listed_in_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    for path in CAPTURES:
        assert f"`{path.name}`" in sources


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_properties_hold_on_every_capture(path: Path) -> None:
    text = path.read_text()
    result = parse_xid(text)
    json.dumps(result)
    assert len(result["events"]) == text.count("NVRM: Xid (")
    for event in result["events"]:
        assert isinstance(event["xid"], int) and event["pci"].count(":") == 2
        assert event["class"] == classify_xid(event["xid"])
    assert result["ok"] is (not result["node_faults"] and not result["bus_drops"])


def test_xid79_is_a_node_fault() -> None:
    result = parse("xid79_fallen_off_bus_line.txt")
    (event,) = result["events"]
    assert (event["pci"], event["xid"], event["pid"]) == ("0000:44:00", 79, None)
    assert event["message"] == "GPU has fallen off the bus" and event["class"] == "node"
    assert result["node_faults"] == [79] and result["ok"] is False


def test_xid63_with_pid() -> None:
    (event,) = parse("xid63_row_remapper_line.txt")["events"]
    assert (event["pci"], event["xid"], event["pid"]) == ("0000:10:1c", 63, 1896)
    assert event["message"].startswith("Row Remapper: New row marked for remapping")


def test_dmesg_T_application_faults() -> None:
    result = parse("dmesg_T_xid13_no_pid.txt")
    assert result["counts"] == {"13": 8} and result["ok"] is True
    first = result["events"][0]
    assert first["timestamp"] == "Wed Jun 24 15:44:20 2026" and first["pid"] is None
    assert first["class"] == "application" and first["message"].endswith("MMU Fault")


def test_journal_lines_with_process_and_cause() -> None:
    result = parse("journal_kernel_xid45_caused_by_149.txt")
    assert len(result["events"]) == 7
    first = result["events"][0]
    assert (first["pci"], first["pid"], first["process"], first["caused_by"]) == (
        "0000:dc:00",
        1818990,
        "python3",
        149,
    )
    assert {e["pci"] for e in result["events"]} == {"0000:dc:00", "0000:ed:00", "0000:ba:00", "0000:97:00"}


def test_fallen_off_bus_without_xid_line() -> None:
    result = parse("dmesg_fallen_off_bus_without_xid.txt")
    assert result["events"] == []
    assert result["bus_drops"] == [{"pci": "0000:b3:00.0", "timestamp": "1843.308145", "line": 1}]
    assert result["ok"] is False


# ---- edge handling (inputs built here, not captures) ----


def test_old_format_and_syslog_prefix() -> None:
    text = (
        "Feb 14 05:03:41 gpu-1 kernel: NVRM: Xid (0000:af:00): 48, pid='<unknown>', name=<unknown>, Ch 00000008\n"
        "[ 12.5] usb 1-1: unrelated\n"
    )
    (event,) = parse_xid(text)["events"]
    assert (event["pci"], event["xid"], event["pid"], event["process"]) == ("0000:af:00", 48, None, None)
    assert event["timestamp"] == "Feb 14 05:03:41" and event["class"] == "node"


def test_classification_table() -> None:
    assert [classify_xid(x) for x in (48, 63, 64, 74, 79, 94, 95)] == ["node"] * 7
    assert [classify_xid(x) for x in (13, 31, 43, 45, 68)] == ["application"] * 5
    assert classify_xid(999) == "unknown"
