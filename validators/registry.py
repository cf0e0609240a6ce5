"""The one ordered list of checks. Order is run order: cheap preflight first, then the long ones.

Adding a check means adding it here (and to CHECKS.md, and a test): the completeness test
in tests/validators/test_registry.py holds all three together.
"""

from __future__ import annotations

from typing import Dict, List, Tuple, Type

from validators.checks.base import Check
from validators.checks.burnin import DcgmDiag, GpuBurn, MatmulBurnin
from validators.checks.checkpoint import CheckpointRestart
from validators.checks.fabric import EfaDevices, GpuTopology, InfinibandPorts, NvLink
from validators.checks.gloo import GlooAllreduce
from validators.checks.gpu import GpuHealth, GpuInventory, GpuThrottle, PcieLink
from validators.checks.nccl import NcclMultiNode, NcclSingleNode
from validators.checks.software import PythonRuntime, SoftwareVersions
from validators.checks.system import MemlockLimit, SharedStorage, XidScan

CHECKS: Tuple[Type[Check], ...] = (
    # preflight
    PythonRuntime,
    SoftwareVersions,
    GpuInventory,
    GpuHealth,
    PcieLink,
    NvLink,
    GpuTopology,
    XidScan,
    GpuThrottle,
    EfaDevices,
    InfinibandPorts,
    MemlockLimit,
    SharedStorage,
    # nccl
    NcclSingleNode,
    NcclMultiNode,
    GlooAllreduce,
    # burnin
    MatmulBurnin,
    DcgmDiag,
    GpuBurn,
    # checkpoint
    CheckpointRestart,
)


def all_checks() -> List[Check]:
    return [cls() for cls in CHECKS]


def by_id() -> Dict[str, Check]:
    return {c.id: c for c in all_checks()}


def for_profile(profile: str) -> List[Check]:
    return [c for c in all_checks() if profile in c.profiles]
