"""The three profiles and their default durations and sizes.

This is the one place defaults live; NODE.json's ``durations`` and ``sizes`` override any of
them (SCHEMA.md lists every key). Which checks a profile runs is declared by each check
(``Check.profiles``), so the registry stays the single list of checks.
"""

from __future__ import annotations

from typing import Dict, List, Union

PROFILES = ("quick", "standard", "full")

Number = Union[int, float]

# Seconds / counts. quick fits a Slurm prolog-sized window; standard ~ a maintenance slot.
DEFAULT_DURATIONS: Dict[str, Dict[str, Number]] = {
    "quick": {
        "burnin_seconds": 30,
        "nccl_iterations": 5,
        "nccl_warmup_iterations": 2,
        "gloo_iterations": 5,
        "gloo_min_seconds": 1,
        "checkpoint_steps": 6,
        "telemetry_interval_seconds": 5,
        "pcie_load_seconds": 5,
        "command_timeout_seconds": 60,
        "workload_timeout_seconds": 600,
        "matmul_setup_seconds": 120,
        "peer_timeout_seconds": 120,
    },
    "standard": {
        "burnin_seconds": 300,
        "nccl_iterations": 20,
        "nccl_warmup_iterations": 5,
        "gloo_iterations": 20,
        "gloo_min_seconds": 2,
        "checkpoint_steps": 8,
        "telemetry_interval_seconds": 10,
        "pcie_load_seconds": 10,
        "command_timeout_seconds": 120,
        "workload_timeout_seconds": 3600,
        "matmul_setup_seconds": 120,
        "peer_timeout_seconds": 300,
    },
    "full": {
        "burnin_seconds": 1800,
        "nccl_iterations": 50,
        "nccl_warmup_iterations": 5,
        "gloo_iterations": 50,
        "gloo_min_seconds": 5,
        "checkpoint_steps": 20,
        "telemetry_interval_seconds": 10,
        "pcie_load_seconds": 10,
        "command_timeout_seconds": 120,
        "workload_timeout_seconds": 10800,
        "matmul_setup_seconds": 120,
        "peer_timeout_seconds": 300,
    },
}

_MIB = 1 << 20
_GIB = 1 << 30

# Message sizes, matrix dimensions, worker counts.
DEFAULT_SIZES: Dict[str, Dict[str, Number]] = {
    "quick": {
        "nccl_min_bytes": 1 * _GIB,
        "nccl_max_bytes": 4 * _GIB,
        "gloo_bytes": 16 * _MIB,
        "gloo_local_ranks": 2,
        "matmul_dim": 8192,
        "cpu_matmul_dim": 256,
        "cpu_workers": 2,
        "storage_test_bytes": 16 * _MIB,
        "checkpoint_width": 256,
        "checkpoint_bytes": 256 * _MIB,
        "checkpoint_world_size": 1,
    },
    "standard": {
        "nccl_min_bytes": 256 * _MIB,
        "nccl_max_bytes": 8 * _GIB,
        "gloo_bytes": 64 * _MIB,
        "gloo_local_ranks": 2,
        "matmul_dim": 8192,
        "cpu_matmul_dim": 512,
        "cpu_workers": 2,
        "storage_test_bytes": 256 * _MIB,
        "checkpoint_width": 1024,
        "checkpoint_bytes": 256 * _MIB,
        "checkpoint_world_size": 1,
    },
    "full": {
        "nccl_min_bytes": 64 * _MIB,
        "nccl_max_bytes": 16 * _GIB,
        "gloo_bytes": 256 * _MIB,
        "gloo_local_ranks": 2,
        "matmul_dim": 8192,
        "cpu_matmul_dim": 512,
        "cpu_workers": 4,
        "storage_test_bytes": 1 * _GIB,
        "checkpoint_width": 2048,
        "checkpoint_bytes": 1 * _GIB,
        "checkpoint_world_size": 1,
    },
}

# Message-size sweeps (NODE.json sizes that are lists of bytes). gloo-allreduce measures every
# size of its profile's sweep besides the judged one (sizes.gloo_bytes or the threshold's
# message_bytes), for the report's bandwidth-against-message-size plot; only the judged size is
# judged. 4x steps from 1 MiB (latency-bound on gloo) past the judged size to where the curve
# flattens. quick stays at 64 MiB: 85 MiB in all, about 5x the 16 MiB judged alone, which is a few
# seconds at the 0.05-0.5 GB/s container nodes measure with 5 iterations, so the run still fits a
# prolog-sized window. standard and full reach their own gloo_bytes (64 / 256 MiB) and 256 MiB,
# not 1 GiB: two local ranks each hold one buffer of the largest size on a container node.
DEFAULT_SWEEPS: Dict[str, Dict[str, List[int]]] = {
    "quick": {"gloo_sweep_bytes": [1 * _MIB, 4 * _MIB, 16 * _MIB, 64 * _MIB]},
    "standard": {"gloo_sweep_bytes": [1 * _MIB, 4 * _MIB, 16 * _MIB, 64 * _MIB, 256 * _MIB]},
    "full": {"gloo_sweep_bytes": [1 * _MIB, 4 * _MIB, 16 * _MIB, 64 * _MIB, 256 * _MIB]},
}

# Thresholds with a default that does not depend on the hardware (the rest come from the
# catalogue through NODE.json). A GPU 7 % under its node's median fails, 3.5 % warns: Azure's GPU
# GEMM bands (replace / warn; the catalogue's source azure-outlier), which Azure measures against
# an expected per-GPU figure; the node's own median is that figure here (hardware.yaml
# common_thresholds says why). On the CPU path the "devices" are worker processes time-sharing
# cores with everything else on the machine, so only a grossly slow worker is a finding there.
DEFAULT_THRESHOLDS: Dict[str, float] = {
    "matmul.median_gap_pct": 7.0,
    "matmul.median_warn_pct": 3.5,
    "matmul.cpu_median_gap_pct": 50.0,
}

# dcgmi diag run level per profile (quick runs none: -r 3 takes ~15 min).
DCGM_LEVEL = {"quick": 0, "standard": 3, "full": 4}
