"""What the workstation renders for the loop: whether the spec enables it, its config (pure), and the hash
of the package the controller installs (read from its files, once per process).

Enabled only with ``health.active.profile`` set AND a shared storage path (the jobs' reports and the
loop's journal live there): a spec without a ``health`` section, like the local stack's, renders
nothing new and its slurm.conf stays byte for byte what it was.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.health.loop.config import PARTITION, RESERVATION, STATE_FOLDER
from clusterforge.providers.base import Node
from clusterforge.providers.local.share import compute_share_label
from clusterforge.spec.models import ClusterSpec

PACKAGE_DIR = Path(__file__).resolve().parents[2]  # the clusterforge package the head installs
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache"}


@cache
def package_hash(package_dir: Path = PACKAGE_DIR) -> str:
    """16 hex of the package's files, as roles/slurm/files/build_wheelhouse.py versions its wheel
    (``<version>+<this>``). Rendered for the controller, so a changed package changes its inputs'
    fingerprint and the next `up` converges it (installs the new wheel); once per process."""
    content = hashlib.sha256()
    top = package_dir.parent
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = Path(root, name)
            digest = hashlib.sha256(path.read_bytes()).digest()
            content.update(path.relative_to(top).as_posix().encode() + b"\0" + digest)
    return content.hexdigest()[:16]


def loop_enabled(spec: ClusterSpec) -> bool:
    return spec.health.active.profile is not None and bool(spec.storage.shared_path)


def active_suite(spec: ClusterSpec) -> str:
    name = spec.health.active.profile or ""
    prof = spec.certification.profiles.get(name)
    return prof.suite if prof is not None else name


def fleet_part(spec: ClusterSpec, hw: HardwareCatalog) -> dict[str, Any]:
    """``certify.fleet.inputs.fleet_inputs(spec, <active profile>)`` less ``versions``: the inventory
    renders this, and the pinned versions come from ``node.config``, which reads the inventory (an
    import circle). Without versions the judge takes the copied baseline's samples whatever their
    versions (tests/health/test_loop_render.py holds the rest equal to fleet_inputs)."""
    name = spec.health.active.profile
    overrides: dict[str, dict[str, float]] = {}
    across: dict[str, bool] = {}
    shares: dict[str, str] = {}
    for pool in spec.pools_with_role("gpu"):
        it = hw.get(pool.instance_type)
        prof = spec.certification.profiles.get(name or pool.certification or "")
        if it is None or it.name in overrides:
            continue
        overrides[it.name] = dict(prof.thresholds) if prof else {}
        across[it.name] = bool(prof and prof.baseline_across_versions)
        shares[it.name] = compute_share_label(spec, hw) if it.container else ""
    return {"overrides": overrides, "across_versions": across, "shares": shares}


def loop_config(spec: ClusterSpec, nodes: Sequence[Node], hw: HardwareCatalog) -> dict[str, Any]:
    """The JSON the head node's loop reads (``health.loop.config.parse_config``)."""
    return {
        "stack": spec.stack,
        "health": spec.health.model_dump(mode="json"),
        "state_dir": f"{spec.storage.shared_path}/{STATE_FOLDER}",
        "active_suite": active_suite(spec),
        "provider": spec.provider.kind,
        "partition": PARTITION,
        "reservation": RESERVATION,
        "textfile_dir": "/var/lib/prometheus/node-exporter",
        "nodes": {
            n.name: {
                "pool": n.pool,
                "instance_type": n.instance_type,
                "identities": [n.provider_id] if n.provider_id else [],
            }
            for n in sorted(nodes, key=lambda n: n.name)
            if n.role == "gpu"
        },
        "fleet": fleet_part(spec, hw),
    }
