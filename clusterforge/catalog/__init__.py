"""Hardware and software catalogues: data files with sources, given types and cached loaders."""

from clusterforge.catalog.compat import CompatMatrix, load_compat
from clusterforge.catalog.hardware import (
    FleetRules,
    GpuSpec,
    HardwareCatalog,
    InstanceType,
    NcclThreshold,
    NetworkSpec,
    Thresholds,
    load_hardware,
)

__all__ = [
    "CompatMatrix",
    "FleetRules",
    "GpuSpec",
    "HardwareCatalog",
    "InstanceType",
    "NcclThreshold",
    "NetworkSpec",
    "Thresholds",
    "load_compat",
    "load_hardware",
]
