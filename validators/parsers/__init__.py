"""Parsers of the tools a GPU node is certified with. Stdlib only; Python 3.9 syntax.

Every parser is a pure function `text -> dict` (JSON-serialisable), registered in `PARSERS` under the
tool name used by `python3 -m validators parse TOOL FILE`. Each was tested on captured real output
kept in tests/data/<tool>/ (sources in the SOURCES.md next to the files). A parser never raises on
odd input: what it cannot read shows up as `complete: false`, `ok: false` or an `error` string, so a
check built on it fails with a reason instead of passing.

nccl-tests  (nccl_tests.parse_nccl_tests; text stdout of any release, or the `-J` JSON file)
    collective      str|None   "all_reduce", from "# Collective test starting: all_reduce_perf" or an
                               echoed command line ("..._perf" / "..._perf_mpi")
    binary          str|None   the binary name as seen
    version         str|None   nccl-tests version ("2.19.7") when printed
    ranks           int|None   highest "#  Rank N" + 1, else nThread x nGpus from the header
    validation      int|None   the header's "validation: N" (0 with -c 0: nothing checked, #wrong is N/A)
    devices         list       per "#  Rank" line: rank, pid, host, device, bus, name
    rows            list       in printed order, each:
        size int (bytes), count int|None, type str|None, redop str|None (absent in old all_gather/
        broadcast), root int|None (absent in older releases; -1 where the collective has none),
        out_of_place / in_place: {time_us float, algbw float, busbw float (GB/s),
                                  wrong int|None   (#wrong column; None when printed N/A, -c 0),
                                  error float|None (the old float `error`/`res` column; None otherwise)}
    out_of_bounds   int|None   "# Out of bounds values : N OK|FAILED" (summed when a log holds several runs)
    runs            int        runs in the text (run headers or footers seen; a log can hold several, rows
                               then restart at the smallest size; avg_busbw is the last run's)
    bitwise_mismatches int     only when the run printed "# Bitwise mismatches"
    avg_busbw       float|None "# Avg bus bandwidth : X" (mean over all rows; certify on rows instead)
    avg_busbw_check str|None   "OK"/"FAILED" when the run was given a bandwidth to check
    complete        bool       both footer lines seen (a run that died has no footer)
    errors          list[str]  NCCL WARN, "Test NCCL failure", "Test CUDA failure", "Test failure",
                               "NCCL failure", "Test timeout", "# error:" lines
    ok              bool       complete, rows present, no row with wrong > 0, out_of_bounds == 0,
                               no bitwise mismatch, avg bandwidth check not FAILED
    format          "text"|"json"
  Launcher tags ("0: " from srun --label, "[1,0]<stdout>:" from mpirun --tag-output, "[0] " from MPICH/Intel
  MPI -prepend-rank) and interleaved
  NCCL INFO/WARN lines are tolerated anywhere, also inside a row (its pieces are rejoined). A 2019-21 row
  that printed a blank redop/root under a header naming them (alltoall) is read from the right.
    refused         list       rows not read: {line int, text str, size int|None, why str} (cut short and
                               never completed, columns run together, figures out of line with the run's)

dcgmi-diag  (dcgm.parse_dcgmi_diag; `dcgmi diag -j` of DCGM 3.x "DCGM GPU Diagnostic" or 4.x
             "DCGM Diagnostic", or the boxed text table)
    tests           list       each: name str, category str|None, status "pass"|"fail"|"warn"|"skip"|
                               "not_run" (worst over the GPUs; an unknown word counts as fail),
                               gpus {"<gpu index>": status} where given, messages [str] (warnings,
                               info, Error rows; wrapped text rejoined)
    failed          list[str]  names of tests with status fail
    skipped         list[str]  names of tests with status skip or not_run (a run can skip all but one)
    ok              bool       at least one test and none failed (warn does not fail)
    version         str|None   DCGM version;  driver_version str|None ("Driver Version Detected")
    error           str|None   the "Error: ..." lines from dcgmi joined with "; ", the JSON's
                               "runtime_error", no result document, or no tests at all
    warning         str        only when the JSON carries a top-level "Warning" (deprecation notes)
    format          "json"|"text"

nvidia-smi  (nvidia_smi.parse_nvidia_smi; `nvidia-smi -q` text or `-q -x` XML, drivers 470..570)
    driver_version  str|None;  cuda_version str|None;  attached_gpus int|None
    gpus            list       each:
        bus_id str, name str, uuid str|None, persistence_mode bool|None,
        ecc_uncorrected_volatile int|None  (sum of volatile uncorrectable counters: SRAM/DRAM, parity,
                                            SEC-DED; pre-Ampere: Double Bit Total)
        ecc_corrected_volatile int|None, remapped_rows_pending bool|None, remapped_rows_failure bool|None
        ("Remapped Rows : N/A" -> None), retired_pages_pending bool|None ("Pending Page Blacklist"),
        pcie_gen_current/pcie_gen_max/pcie_width_current/pcie_width_max int|None (width "16x" -> 16;
        links downclock when idle, read under load),
        throttle_active list[str]|None: active "Clocks Event Reasons" / "Clocks Throttle Reasons" by
        their text labels ("Idle", "SW Power Cap", "HW Slowdown", "HW Thermal Slowdown",
        "HW Power Brake Slowdown", "SW Thermal Slowdown", ...); None when the section is N/A/absent
    error           str|None   nvidia-smi's own failure text ("NVIDIA-SMI has failed because it
                               couldn't communicate with the NVIDIA driver...", "Failed to initialize
                               NVML: ...") or "nvidia-smi printed no GPU section"; None iff gpus
    failures        list[str]  every such failure line, also when other GPUs were read ("Unable to
                               determine the device handle for GPU1: ...: Unknown Error" = a lost GPU)
    format          "text"|"xml"

nvidia-smi-topo  (topo.parse_nvidia_smi_topo; `nvidia-smi topo -m`)
    gpus            list[str]  ["GPU0", ...]
    nics            list[str]  RDMA device names ("mlx5_2", "rdmap16s27") via the NIC Legend, else NICn
    nic_labels      {"NIC0": "mlx5_2"}
    links           {"GPU0": {"GPU1": "NV18", ...}}  kinds X/NV<n>/PIX/PXB/PHB/NODE/SYS
    nic_links       {"GPU0": {"mlx5_2": "PXB", ...}}
    affinity        {"GPU0": {cpu_affinity str|None, numa_affinity str|None, gpu_numa_id str|None}}
                               (raw rows are split on tabs, so an empty CPU Affinity cell reads as None)
    error           str|None   no complete GPU matrix found

gpu-burn  (gpu_burn.parse_gpu_burn; wilicc/gpu-burn stdout)
    gpus            list       each: index int, name str|None, ok bool|None (final OK/FAULTY; None
                               when the run never printed it), errors int|None (last printed count),
                               error_flag "warning"|"died"|None, iterations int|None, gflops float|None,
                               temp_c int|None
    complete        bool       "Tested N GPUs:" with N verdict lines (gpu_burn exits 0 even if FAULTY)
    progress_percent float|None
    ok              bool       complete, every GPU OK, every GPU did iterations > 0, no error counts
    error           str|None   "No clients are alive!", "Couldn't init a GPU test: ...", or a verdict
                               printed without any completed iteration

xid  (xid.parse_xid, xid.classify_xid; kernel log: dmesg, dmesg -T, journalctl/syslog, bare lines)
    events          list       each: pci str ("0000:3b:00"), xid int, pid int|None, process str|None,
                               message str, class "node"|"application"|"unknown", caused_by int|None
                               ("caused by previous Xid N"), timestamp str|None (as printed), line int
    bus_drops       list       "NVRM: The NVIDIA GPU <pci> ... fallen off the bus" without an Xid line
    counts          {"79": 1}
    node_faults     list[int]  distinct Xids classified node
    ok              bool       no node-class Xid and no bus drop
  classify_xid(xid) -> "node" for 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154;
  "application" for 13, 31, 43, 45, 68; else "unknown" (NVIDIA XID catalogue, gcm, k8s-device-plugin).

fi-info  (fi_info.parse_fi_info; `fi_info -p efa [-t FI_EP_RDM]`)
    providers       list       each {provider, fabric, domain, version, type, protocol} as printed
    domains         list[str]  distinct domains;  rdm_domains: the efa FI_EP_RDM ones
    efa_devices     list[str]  distinct EFA devices (domain without -rdm/-dgrm), naturally sorted
    efa_device_count int
    error           str|None   "fi_getinfo: -61 (FI_ENODATA: ...)" or "fi_info printed no provider"

ibstat  (infiniband.parse_ibstat; rdma-core infiniband-diags `ibstat`)
ibstatus  (infiniband.parse_ibstatus; rdma-core `ibstatus`)
    ports           list       per HCA port, the same record from both tools: device str ("mlx5_0"),
                               port int, state str|None ("Active", "Down", "Initializing", "Armed";
                               ibstatus' "4: ACTIVE" read as "Active"), physical_state str|None
                               ("LinkUp", "Disabled", "Polling"), rate_gbps float|None (Gb/s),
                               width/speed str|None (ibstatus only: "4X", "EDR"), link_layer str|None
                               ("InfiniBand", "Ethernet" = RoCE)
    cas             list       ibstat only: each {name, type, firmware, ports (count)}
    errors          list[str]  "ibpanic:"/"ibwarn:" lines (e.g. a CA listed but gone: "stat of IB device
                               'mlx5_8' failed")
    error           str|None   the first such line, or "no InfiniBand port in the output", when no port was read

nccl-net  (nccl_net.parse_nccl_net; NCCL's NCCL_DEBUG=INFO log, NCCL_DEBUG_SUBSYS=INIT,NET suffices)
    networks        {name: lines}  "NCCL INFO Using network <name>" ("AWS Libfabric"/"Libfabric" = aws-ofi-nccl,
                               "Socket", "IB")
    plugin          {name, api}|None   "NET/Plugin: Loaded net plugin <name> (v<api>)"
    ofi_version     str|None   "NET/OFI Initializing aws-ofi-nccl <v>" (1.7 on) / "NET/OFI Using aws-ofi-nccl <v>"
    providers       {name: lines}  "NET/OFI Selected [Pp]rovider is <name>"; fabrics list[str] ("fabric is", 1.14 on);
                               nics int|None (largest "(found N nics)")
    plugin_missing  list[str]  why libnccl-net.so was not used, per NCCL release's wording ("Plugin load
                               (libnccl-net.so) returned 2 : ...: cannot open shared object file", "No plugin
                               found", "Could not find: libnccl-net.so", "Using internal net plugin")
    ofi_errors      list[str]  "NCCL WARN NET/OFI ..." messages ("aws-ofi-nccl initialization failed")
    ofi_used        bool;  fallback list[str] (networks other than the OFI plugin's)
    reasons         list[str]  why the log does not show aws-ofi-nccl over EFA: a non-OFI network (with the
                               first missing/OFI reason), a provider other than efa, no "Using network" line, or
                               the OFI network without a "Selected provider" line
    ok              bool       no reasons
  CollNet, tuner and profiler plugin lines are ignored; newest-first symbol probes ("Failed to find
  ncclNetPlugin_v7 symbol." before "Loaded net plugin ... (v6)") are not failures.

nvlink  (nvlink.parse_nvlink_status; `nvidia-smi nvlink --status` / `-s`)
    gpus            list       each: index int, name str|None, uuid str|None, note str|None (text after the
                               UUID, e.g. "Device does not have or support Nvlink"), links {"<n>": GB/s float
                               or None for <inactive>}, links_up int (rate > 0), inactive list[int] (links
                               listed as <inactive> or 0 GB/s), max_gbps float|None
    error           str|None   nvidia-smi's own failure text, or "nvidia-smi nvlink printed no GPU"
"""

from __future__ import annotations

from typing import Any, Callable, Dict

from validators.parsers.dcgm import parse_dcgmi_diag
from validators.parsers.fi_info import parse_fi_info
from validators.parsers.gpu_burn import parse_gpu_burn
from validators.parsers.infiniband import parse_ibstat, parse_ibstatus
from validators.parsers.nccl_net import parse_nccl_net
from validators.parsers.nccl_tests import parse_nccl_tests
from validators.parsers.nvidia_smi import parse_nvidia_smi
from validators.parsers.nvlink import parse_nvlink_status
from validators.parsers.topo import parse_nvidia_smi_topo
from validators.parsers.xid import classify_xid, parse_xid

PARSERS: Dict[str, Callable[[str], Dict[str, Any]]] = {
    "nccl-tests": parse_nccl_tests,
    "nvidia-smi": parse_nvidia_smi,
    "dcgmi-diag": parse_dcgmi_diag,
    "nvidia-smi-topo": parse_nvidia_smi_topo,
    "gpu-burn": parse_gpu_burn,
    "xid": parse_xid,
    "fi-info": parse_fi_info,
    "ibstat": parse_ibstat,
    "ibstatus": parse_ibstatus,
    "nvlink": parse_nvlink_status,
    "nccl-net": parse_nccl_net,
}

__all__ = [
    "PARSERS",
    "classify_xid",
    "parse_dcgmi_diag",
    "parse_fi_info",
    "parse_gpu_burn",
    "parse_ibstat",
    "parse_ibstatus",
    "parse_nccl_net",
    "parse_nccl_tests",
    "parse_nvidia_smi",
    "parse_nvidia_smi_topo",
    "parse_nvlink_status",
    "parse_xid",
]
