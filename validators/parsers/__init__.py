"""Parsers of GPU-node tool outputs (work in progress: see the full field list once every tool is in)."""

from __future__ import annotations

from typing import Any, Callable, Dict

from validators.parsers.dcgm import parse_dcgmi_diag
from validators.parsers.gpu_burn import parse_gpu_burn
from validators.parsers.nccl_tests import parse_nccl_tests
from validators.parsers.nvidia_smi import parse_nvidia_smi
from validators.parsers.topo import parse_nvidia_smi_topo
from validators.parsers.xid import classify_xid, parse_xid

PARSERS: Dict[str, Callable[[str], Dict[str, Any]]] = {
    "nccl-tests": parse_nccl_tests,
    "nvidia-smi": parse_nvidia_smi,
    "dcgmi-diag": parse_dcgmi_diag,
    "nvidia-smi-topo": parse_nvidia_smi_topo,
    "gpu-burn": parse_gpu_burn,
    "xid": parse_xid,
}

__all__ = [
    "PARSERS",
    "classify_xid",
    "parse_xid",
    "parse_dcgmi_diag",
    "parse_gpu_burn",
    "parse_nccl_tests",
    "parse_nvidia_smi",
    "parse_nvidia_smi_topo",
]
