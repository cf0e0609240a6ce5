"""Parsers of sinfo / scontrol output, on output captured from Slurm 22.05 (tests/data/slurm/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.slurm.parse import (
    expand_hostlist,
    parse_reservations,
    parse_scontrol_records,
    parse_sinfo,
    parse_state,
    split_reason,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def read(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize(
    ("file", "expected"),
    [
        ("sinfo-idle.txt", {"node-001": ("idle", True, ""), "node-002": ("idle", True, "")}),
        (
            "sinfo-drained-certifying.txt",
            {"node-001": ("drained", False, "clusterforge: certifying"), "node-002": ("idle", True, "")},
        ),
        (
            "sinfo-maint-reservation.txt",
            {"node-001": ("drained", False, "clusterforge: certifying"), "node-002": ("maint", False, "")},
        ),
        (
            "sinfo-allocated-in-reservation.txt",
            {"node-001": ("allocated", False, ""), "node-002": ("allocated", False, "")},
        ),
        (
            "sinfo-draining.txt",
            {
                "node-001": ("allocated", False, ""),
                "node-002": ("draining", False, "clusterforge: nccl-allreduce: busbw 0.41 GB/s < 1.00 GB/s"),
            },
        ),
        (
            "sinfo-released-and-failed.txt",
            {
                "node-001": ("planned", True, ""),
                "node-002": ("drained", False, "clusterforge: nccl-allreduce: busbw 0.41 GB/s < 1.00 GB/s"),
            },
        ),
        (
            "sinfo-noheader.txt",
            {
                "node-001": ("planned", True, ""),
                "node-002": ("drained", False, "clusterforge: nccl-allreduce: busbw 0.41 GB/s < 1.00 GB/s"),
            },
        ),
    ],
)
def test_sinfo(file: str, expected: dict[str, tuple[str, bool, str]]) -> None:
    nodes = parse_sinfo(read(file))
    assert {n: (s.state, s.serving, s.reason) for n, s in nodes.items()} == expected


def test_maintenance_suffix_is_a_flag_not_a_state() -> None:
    nodes = parse_sinfo(read("sinfo-maint-reservation.txt"))
    assert nodes["node-001"].drained and nodes["node-001"].in_maintenance
    assert nodes["node-001"].display == "drained$"
    assert nodes["node-002"].in_maintenance and not nodes["node-002"].drained


def test_state_suffixes() -> None:
    assert parse_state("idle*") == ("idle", frozenset({"not_responding"}))
    assert parse_state("draining$") == ("draining", frozenset({"maintenance"}))
    assert parse_state("down~") == ("down", frozenset({"powered_off"}))
    assert parse_state("IDLE") == ("idle", frozenset())


def test_not_responding_node_is_not_serving() -> None:
    node = parse_sinfo("node-009 idle* none\n")["node-009"]
    assert not node.responding and not node.serving


def test_scontrol_show_node_drained() -> None:
    (rec,) = parse_scontrol_records(read("scontrol-show-node-drained.txt"))
    assert rec["NodeName"] == "node-001"
    assert rec["State"] == "IDLE+DRAIN"
    assert rec["CfgTRES"] == "cpu=1,mem=1M,billing=1"
    assert rec["OS"].startswith("Linux 6.18.44")
    assert split_reason(rec["Reason"]) == ("clusterforge: certifying", "root", "2026-11-30T03:29:04")


def test_scontrol_show_node_draining_keeps_colons_and_spaces_of_reason() -> None:
    (rec,) = parse_scontrol_records(read("scontrol-show-node-draining.txt"))
    assert rec["State"] == "ALLOCATED+DRAIN+MAINTENANCE+RESERVED"
    text, user, _ = split_reason(rec["Reason"])
    assert text == "clusterforge: nccl-allreduce: busbw 0.41 GB/s < 1.00 GB/s" and user == "root"


def test_scontrol_show_node_idle_has_no_reason() -> None:
    (rec,) = parse_scontrol_records(read("scontrol-show-node-idle.txt"))
    assert "Reason" not in rec and rec["NodeName"] == "node-001"


def test_reservations() -> None:
    res = parse_reservations(read("scontrol-show-reservation.txt"))
    cert = res["clusterforge_cert"]
    assert cert.nodes == ("node-001", "node-002")
    assert {"MAINT", "IGNORE_JOBS"} <= cert.flags and cert.state == "ACTIVE"
    one = parse_reservations(read("scontrol-show-reservation-one-node.txt"))["clusterforge_cert"]
    assert one.nodes == ("node-001",)
    assert parse_reservations("No reservations in the system\n") == {}


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("node-[001-002]", ["node-001", "node-002"]),
        ("node-[001-003,007],head-001", ["node-001", "node-002", "node-003", "node-007", "head-001"]),
        ("node-001", ["node-001"]),
        ("(null)", []),
        ("", []),
        ("gpu[8-10]", ["gpu8", "gpu9", "gpu10"]),
    ],
)
def test_expand_hostlist(expr: str, names: list[str]) -> None:
    assert expand_hostlist(expr) == names
