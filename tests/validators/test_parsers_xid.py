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


# ---- captures added in the second pass (sources in SOURCES.md) ----


def test_journal_gsp_xid_without_pid_among_other_lines() -> None:
    result = parse("journal_fedora_xid120_gsp_no_pid.txt")
    (event,) = result["events"]
    assert event["xid"] == 120 and event["pci"] == "0000:23:00" and event["pid"] is None
    assert event["message"].startswith("GSP task exception: load access page fault (cause:0xd)")
    assert event["timestamp"] == "Aug 19 21:36:23" and event["line"] == 8
    assert event["class"] == "node" and result["node_faults"] == [120] and result["ok"] is False


def test_ctime_unknown_pid_and_named_process() -> None:
    result = parse("dmesg_ctime_xid13_unknown_pid_xid109_name.txt")
    assert [e["xid"] for e in result["events"]] == [13, 13, 13, 109]
    first, last = result["events"][0], result["events"][-1]
    assert (
        first["pid"] is None and first["process"] is None and first["timestamp"] == "Fri Aug 30 11:43:09 2024"
    )
    assert (
        first["message"]
        == "Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter"
    )
    assert last["pid"] == 1797828 and last["process"] == "pt_main_thread"
    assert last["message"] == "Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005"
    assert result["counts"] == {"13": 3, "109": 1} and result["ok"] is True


def test_2015_channel_id_wording() -> None:
    result = parse("dmesg_2015_xid32_31_channel_id.txt")
    assert [(e["xid"], e["timestamp"]) for e in result["events"]] == [
        (32, "24128.828315"),
        (32, "24128.828608"),
        (31, "24128.834365"),
    ]
    assert result["events"][0]["message"] == "Channel ID 00000000 intr 00004000"
    assert result["events"][2]["class"] == "application" and result["ok"] is True


def test_dmesg_iso_and_facility_prefixes() -> None:
    """Line prefixes of `dmesg --time-format iso` and `dmesg -x` (util-linux dmesg(1)) on real Xid lines."""
    text = (
        "kern  :warn  : [ 1843.308145] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen"
        " off the bus.\n"
        "2024-08-30T11:43:09,123456+00:00 NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>,"
        " Graphics SM Warp Exception\n"
    )
    first, second = parse_xid(text)["events"]
    assert first["timestamp"] == "1843.308145" and first["xid"] == 79 and first["process"] == "python"
    assert second["timestamp"] == "2024-08-30T11:43:09,123456+00:00" and second["pid"] is None


def test_journal_bus_drop_without_xid() -> None:
    result = parse("journal_fallen_off_bus_without_xid_2018.txt")
    assert result["events"] == [] and result["counts"] == {}
    assert result["bus_drops"] == [{"pci": "0000:01:00.0", "timestamp": "Mar 07 19:30:42", "line": 2}]
    assert result["ok"] is False
