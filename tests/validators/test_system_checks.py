"""xid-scan on captured kernel log lines (tests/data/xid), shared-storage, memlock-limit, nvlink, topology, efa."""

from __future__ import annotations

import resource
from pathlib import Path

from conftest import FakeRunner, captured, gpu_config, make_context, tiny_cpu_config

from validators.checks.fabric import EfaDevices, GpuTopology, NvLink, parse_nvlink_status
from validators.checks.system import MemlockLimit, SharedStorage, XidScan, mount_of
from validators.suite import run_check

JOURNAL = ("journalctl", "-k", "-b")


def test_xid_79_fails_as_a_node_fault() -> None:
    runner = FakeRunner({JOURNAL: (0, captured("xid", "xid79_fallen_off_bus_line.txt"), "")})
    result = run_check(XidScan(), make_context(gpu_config(), runner))
    assert result.status == "fail"
    assert result.summary.startswith("Xid 79 on 0000:44:00 (node fault)")
    assert result.metrics["xid_node"]["value"] == 1


def test_application_xids_are_reported_not_failed() -> None:
    runner = FakeRunner({JOURNAL: (0, captured("xid", "dmesg_T_xid13_no_pid.txt"), "")})
    result = run_check(XidScan(), make_context(gpu_config(), runner))
    assert result.status == "pass", result.summary
    assert result.metrics["xid_application"]["value"] == 8
    assert "8 application fault(s) reported" in result.summary


def test_gpu_fallen_off_the_bus_without_an_xid_fails() -> None:
    runner = FakeRunner({JOURNAL: (0, captured("xid", "dmesg_fallen_off_bus_without_xid.txt"), "")})
    result = run_check(XidScan(), make_context(gpu_config(), runner))
    assert result.status == "fail"
    assert "fell off the bus" in result.summary


def test_unreadable_kernel_log_fails_with_both_reasons() -> None:
    runner = FakeRunner({("dmesg",): (1, "", "dmesg: read kernel buffer failed: Operation not permitted")})
    result = run_check(XidScan(), make_context(gpu_config(), runner))
    assert result.status == "fail"
    assert "journalctl not found" in result.summary and "Operation not permitted" in result.summary
    assert len(runner.calls) == 2  # journalctl, then the dmesg fallback


def test_shared_storage_writes_reads_and_requires_a_mount(tmp_path: Path) -> None:
    cfg = tiny_cpu_config(tmp_path)
    result = run_check(SharedStorage(), make_context(cfg, FakeRunner({})))
    assert result.status == "pass", result.summary
    assert result.metrics["write_rate"]["unit"] == "MB/s"
    assert list(tmp_path.iterdir()) == []  # the test file is removed
    cfg["shared_storage"]["require_mount"] = True
    result = run_check(SharedStorage(), make_context(cfg, FakeRunner({})))
    if mount_of(str(tmp_path))[0] == "/":  # tmp on the root disk, as on this machine
        assert result.status == "fail" and "not on a mounted filesystem" in result.summary
    else:
        assert result.status == "pass", result.summary
    cfg["shared_storage"]["path"] = str(tmp_path / "missing")
    result = run_check(SharedStorage(), make_context(cfg, FakeRunner({})))
    assert result.status == "fail" and "does not exist" in result.summary


def test_memlock_limit_against_unlimited() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    result = run_check(MemlockLimit(), make_context(gpu_config(), FakeRunner({})))
    if soft == resource.RLIM_INFINITY:
        assert result.status == "pass"
    else:
        assert result.status == "fail" and "EFA needs unlimited" in result.summary


# `nvidia-smi nvlink --status` as printed in stas00/ml-engineering (network/debug) for an H100,
# with the per-link lines written out; link 5 of GPU 1 is made inactive, link 3 degraded, to
# exercise the fault paths (not a capture).
NVLINK_OK = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-abcdefab-cdef-abdc-abcd-abababababab)\n" + "".join(
    f"         Link {i}: 26.562 GB/s\n" for i in range(18)
)


def test_nvlink_counts_links_up_per_gpu() -> None:
    cfg = gpu_config(gpu={"count": 1, "model": "H100", "nvlink_links_per_gpu": 18, "nvswitch": True})
    ok = run_check(NvLink(), make_context(cfg, FakeRunner({("nvidia-smi", "nvlink"): (0, NVLINK_OK, "")})))
    assert ok.status == "pass", ok.summary
    broken = NVLINK_OK.replace("Link 5: 26.562 GB/s", "Link 5: <inactive>").replace(
        "Link 3: 26.562", "Link 3: 1.562"
    )
    assert parse_nvlink_status(broken)[0][5] is None
    result = run_check(NvLink(), make_context(cfg, FakeRunner({("nvidia-smi", "nvlink"): (0, broken, "")})))
    assert result.status == "fail"
    assert "GPU 0: 17 NVLink links up, expected 18 (inactive: [5])" in result.summary
    assert "links [3] below 26.562 GB/s" in result.summary


def test_topology_on_nvswitch_requires_nvlink_between_all_pairs() -> None:
    cfg = gpu_config()
    text = captured("nvidia-smi-topo", "topo_8xh20_nv18_8nics_no_legend.txt")
    result = run_check(GpuTopology(), make_context(cfg, FakeRunner({("nvidia-smi", "topo"): (0, text, "")})))
    assert result.status == "pass", result.summary
    assert "NV18" in result.summary
    pcie = captured("nvidia-smi-topo", "topo_2x1080ti_phb_legend.txt")
    result = run_check(GpuTopology(), make_context(cfg, FakeRunner({("nvidia-smi", "topo"): (0, pcie, "")})))
    assert result.status == "fail"
    assert "not on NVLink" in result.summary


def test_efa_devices_missing_fi_info_fails() -> None:
    result = run_check(EfaDevices(), make_context(gpu_config(), FakeRunner({})))
    assert result.status == "fail"
    assert result.summary.startswith("fi_info not found")


def test_efa_device_count_against_the_catalogue() -> None:
    text = captured("fi-info", "p4d_4_efa_rdm.txt")  # p4d.24xlarge: 4 EFA devices
    answer = {("fi_info", "-p", "efa"): (0, text, "")}
    result = run_check(EfaDevices(), make_context(gpu_config(efa={"interfaces": 4}), FakeRunner(answer)))
    assert result.status == "pass", result.summary
    result = run_check(EfaDevices(), make_context(gpu_config(), FakeRunner(answer)))  # p5: 32
    assert result.status == "fail"
    assert result.summary == "fi_info lists 4 EFA device(s), expected 32"


def test_efa_provider_absent_fails_with_fi_infos_reason() -> None:
    text = captured("fi-info", "not_found_61.txt")
    result = run_check(EfaDevices(), make_context(gpu_config(), FakeRunner({("fi_info",): (1, text, "")})))
    assert result.status == "fail"
    assert "FI_ENODATA" in result.summary


def test_an_empty_journal_is_not_a_clean_kernel_log() -> None:
    runner = FakeRunner(
        {
            JOURNAL: (0, "-- No entries --\n", ""),
            ("dmesg",): (0, captured("xid", "xid63_row_remapper_line.txt"), ""),
        }
    )
    result = run_check(XidScan(), make_context(gpu_config(), runner))
    assert [call[0] for call in runner.calls] == ["journalctl", "dmesg"]
    assert result.status == "fail" and result.summary.startswith("Xid 63")
    runner = FakeRunner({JOURNAL: (0, "", ""), ("dmesg",): (0, "", "")})
    result = run_check(XidScan(), make_context(gpu_config(), runner))
    assert result.status == "fail"
    assert (
        result.summary == "cannot read the kernel log: journalctl: empty kernel log; dmesg: empty kernel log"
    )
