"""NCCL net-plugin log parser on captured NCCL_DEBUG=INFO logs (tests/data/nccl-net, sources in SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from validators.parsers.nccl_net import parse_nccl_net

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-net"
CAPTURES = sorted(DATA.glob("*.txt"))


def parse(name: str) -> dict:
    return parse_nccl_net((DATA / name).read_text())


def test_every_capture_is_listed_in_sources() -> None:
    sources = (DATA / "SOURCES.md").read_text()
    for path in CAPTURES:
        assert f"`{path.name}`" in sources


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_properties_hold_on_every_capture(path: Path) -> None:
    text = path.read_text()
    result = parse_nccl_net(text)
    json.dumps(result)
    assert sum(result["networks"].values()) == text.count("NCCL INFO Using network ")
    assert result["ok"] == (not result["reasons"])
    assert result["ok"] == (
        result["ofi_used"] and not result["fallback"] and set(result["providers"]) == {"efa"}
    )


# (capture, networks, providers, aws-ofi-nccl version, ok): pass = aws-ofi-nccl in use over efa.
CASES = [
    ("efa_p4d_aws_libfabric_ofi140.txt", {"AWS Libfabric": 3}, {"efa": 3}, "1.4.0aws", True),
    ("efa_p5en_libfabric_16nics.txt", {"Libfabric": 1}, {"efa": 1}, None, True),
    ("ofi_provider_cxi_not_efa.txt", {"AWS Libfabric": 2}, {"cxi": 2}, "1.6.0", False),
    ("socket_ofi_init_failed_cloudwatch.txt", {"Socket": 2}, {}, None, False),
    ("plugin_not_found_nccl218.txt", {}, {}, None, False),
    ("plugin_not_found_socket_nccl248.txt", {}, {}, None, False),
    ("loaded_net_plugin_v6_no_network_line.txt", {}, {}, None, False),
    ("ofi_191_init_mpirun_tagged.txt", {}, {}, "1.9.1-aws", False),
]


@pytest.mark.parametrize(("name", "networks", "providers", "version", "ok"), CASES, ids=[c[0] for c in CASES])
def test_network_provider_and_verdict(
    name: str, networks: dict, providers: dict, version: str, ok: bool
) -> None:
    result = parse(name)
    assert (result["networks"], result["providers"], result["ofi_version"], result["ok"]) == (
        networks,
        providers,
        version,
        ok,
    )


def test_pass_cases_read_the_nic_count_where_printed_and_ignore_other_plugins() -> None:
    p5en = parse("efa_p5en_libfabric_16nics.txt")
    assert p5en["nics"] == 16
    assert (
        p5en["plugin_missing"] == []
    )  # "PROFILER/Plugin: Could not find: libnccl-profiler.so." is another plugin
    p4d = parse("efa_p4d_aws_libfabric_ofi140.txt")
    assert p4d["nics"] is None  # aws-ofi-nccl 1.4 printed no count
    assert (
        p4d["plugin_missing"] == []
    )  # "Failed to find ncclCollNetPlugin_v6 symbol." is CollNet, not the net plugin


def test_socket_fallback_names_the_reason() -> None:
    result = parse("socket_ofi_init_failed_cloudwatch.txt")
    assert result["fallback"] == ["Socket"]
    assert result["ofi_errors"] == ["NET/OFI aws-ofi-nccl initialization failed"]
    assert result["reasons"] == [
        "NCCL used network Socket, not the OFI plugin (NET/OFI aws-ofi-nccl initialization failed)"
    ]


def test_plugin_not_found_in_each_releases_wording() -> None:
    nccl218 = parse("plugin_not_found_nccl218.txt")
    assert nccl218["plugin_missing"] == [
        "libnccl-net.so: load returned 2: libnccl-net.so: cannot open shared object file: No such file or directory"
    ]
    assert nccl218["reasons"][0].startswith("aws-ofi-nccl was not loaded (libnccl-net.so: load returned 2")
    nccl248 = parse("plugin_not_found_socket_nccl248.txt")
    assert nccl248["plugin_missing"] == ["libnccl-net.so: not found"]
    # NCCL 2.23+ wording (src/plugin/net.cc at v2.23.4-1) and the fallback it prints after it.
    line = "h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."
    newer = parse_nccl_net(line + "\nh:1:1 [0] NCCL INFO Using network Socket\n")
    assert newer["plugin_missing"] == ["libnccl-net.so: not found"]
    assert newer["reasons"] == ["NCCL used network Socket, not the OFI plugin (libnccl-net.so: not found)"]


def test_other_provider_fails_naming_it() -> None:
    result = parse("ofi_provider_cxi_not_efa.txt")
    assert result["ofi_used"] is True
    assert result["reasons"] == ["aws-ofi-nccl selected libfabric provider cxi, not efa"]


def test_loaded_plugin_without_a_network_line_is_not_a_pass() -> None:
    result = parse("loaded_net_plugin_v6_no_network_line.txt")
    assert result["plugin"] == {"name": "AWS Libfabric", "api": 6}
    assert result["plugin_missing"] == []  # "Failed to find ncclNetPlugin_v7 symbol." is a probe, v6 loaded
    assert result["reasons"] == [
        "no 'NCCL INFO Using network' line: the log does not show which network NCCL used"
    ]


def test_foreign_and_empty_input() -> None:
    for text in (
        "",
        "garbage\n\x00",
        (DATA.parent / "nccl-tests" / "mpirun_prefixed_eks_p5.txt").read_text(),
    ):
        result = parse_nccl_net(text)
        assert result["ok"] is False and result["networks"] == {}
