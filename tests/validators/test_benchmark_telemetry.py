"""Telemetry and dataset helpers of the benchmark workloads (stdlib parts, fast)."""

from __future__ import annotations

from pathlib import Path

import pytest

from validators.workloads.benchmark import data, node, telemetry

NET_DEV = """\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 94292489   11767    0    0    0     0          0         0 94292489   11767    0    0    0     0       0          0
  eth0: 1000   10    0    0    0     0          0         0     2500      20    0    0    0     0       0          0
  eth1: 24   1    0    0    0     0          0         0     6      1    0    0    0     0       0          0
"""


def test_net_dev_sums_every_interface_but_loopback() -> None:
    assert telemetry.parse_net_dev(NET_DEV) == (1024, 2506)
    assert telemetry.parse_net_dev("") == (0, 0)


def test_gpu_query_rows_and_missing_figures() -> None:
    rows = telemetry.parse_gpu_query("0, 97, 70123, 689.12\n1, 0, 3, [N/A]\nNo devices were found\n")
    assert rows == [
        {"gpu": 0, "util_pct": 97.0, "mem_mib": 70123.0, "power_w": 689.12},
        {"gpu": 1, "util_pct": 0.0, "mem_mib": 3.0, "power_w": None},
    ]


def _cgroup_v1(root: Path, quota: int, usage_ns: int, mem: int) -> None:
    (root / "cpu").mkdir(parents=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (root / "cpuacct").mkdir()
    (root / "cpuacct" / "cpuacct.usage").write_text(f"{usage_ns}\n")
    (root / "memory").mkdir()
    (root / "memory" / "memory.usage_in_bytes").write_text(f"{mem}\n")


def test_cgroup_v1_cpu_cap_usage_and_memory(tmp_path: Path) -> None:
    _cgroup_v1(tmp_path, 30000, 2_500_000_000, 123456)  # podman update --cpus 0.3
    assert telemetry.cpu_limit(str(tmp_path)) == pytest.approx(0.3)
    assert telemetry.cpu_usage_s(str(tmp_path)) == pytest.approx(2.5)
    assert telemetry.memory_bytes(str(tmp_path)) == 123456


def test_cgroup_v2_and_no_cap(tmp_path: Path) -> None:
    (tmp_path / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\n")
    (tmp_path / "cpu.max").write_text("max 100000\n")
    (tmp_path / "memory.current").write_text("42\n")
    assert telemetry.cpu_usage_s(str(tmp_path)) == pytest.approx(1.5)
    assert telemetry.cpu_limit(str(tmp_path)) >= 1
    assert telemetry.memory_bytes(str(tmp_path)) == 42
    (tmp_path / "cpu.max").write_text("50000 100000\n")
    assert telemetry.cpu_limit(str(tmp_path)) == pytest.approx(0.5)


def test_dataset_is_written_once_and_read_back_exactly(tmp_path: Path) -> None:
    path = str(tmp_path / "ds")
    first = data.prepare(path, 2, 3, 4096)
    assert first["shards"] == 2 and (tmp_path / "ds" / "manifest.json").is_file()
    mtime = (tmp_path / "ds" / "shard-00000.bin").stat().st_mtime_ns
    assert data.prepare(path, 2, 3, 4096)["written_s"] == first["written_s"]  # complete: not written again
    assert (tmp_path / "ds" / "shard-00000.bin").stat().st_mtime_ns == mtime
    samples = data.Samples(path)
    assert len(samples) == 6
    assert samples[4] == data.sample_content(4, 4096)
    assert samples[10] == data.sample_content(4, 4096)  # wraps round


def test_an_unprepared_dataset_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no manifest.json: the dataset was not prepared"):
        data.Samples(str(tmp_path))


def test_the_node_driver_finds_itself_and_its_commands() -> None:
    job = {"workload": "train", "ranks_per_node": 2, "nodes": [{"name": "a"}, {"name": "b"}]}
    assert node.this_node(job, "b") == (1, "b")
    assert node.this_node(job, "zz")[0] == -1
    cmds = node.commands(job, 1, "/s/job.json")
    assert [c[0] for c in cmds] == ["rank-2", "rank-3"]
    assert cmds[1][1][-4:] == ["--rank", "3", "--local-rank", "1"]
    assert node.commands({**job, "workload": "infer"}, 1, "/s/job.json") == []  # first node only
    assert [c[0] for c in node.commands({**job, "workload": "infer"}, 0, "c")] == ["infer-0", "infer-1"]


def test_the_benchmark_workloads_use_python39_syntax_only() -> None:
    import ast

    folder = Path(__file__).resolve().parents[2] / "validators" / "workloads" / "benchmark"
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path), feature_version=(3, 9))
        for item in ast.walk(tree):
            assert not isinstance(item, getattr(ast, "Match", ())), f"{path.name}: match statement needs 3.10"
            if isinstance(item, ast.Call) and getattr(item.func, "id", "") == "zip":
                assert not any(k.arg == "strict" for k in item.keywords), f"{path.name}: zip(strict=) is 3.10"
            if isinstance(item, ast.BinOp) and isinstance(
                item.op, ast.BitOr
            ):  # X | Y types are 3.10 at runtime
                names = [getattr(side, "id", "") for side in (item.left, item.right)]
                assert "None" not in names, f"{path.name}:{item.lineno}: use Optional[...] (3.9)"
