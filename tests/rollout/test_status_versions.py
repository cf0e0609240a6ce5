"""`status` during a rollout: the pinned versions the compute nodes differ on, per node."""

from __future__ import annotations

from pathlib import Path

from clusterforge.journal import Journal, NodeRecord
from clusterforge.status import mixed_versions

OLD = {"nvidia_driver_version": "535.261.03", "slurm_version": "22.05.8"}
NEW = {"nvidia_driver_version": "535.309.01", "slurm_version": "22.05.8"}


def test_mixed_versions_name_only_what_differs_on_a_large_fleet(tmp_path: Path) -> None:
    journal = Journal("pt-mixed", tmp_path)
    names = [f"gpu-{i:04d}" for i in range(1, 2001)]
    for i, name in enumerate(names):
        # the first 500 were upgraded (certified versions); the rest only have their converge record
        if i < 500:
            journal.nodes[name] = NodeRecord(versions=dict(NEW))
        else:
            journal.nodes.setdefault(name, type(journal.record(name))()).applied = {
                "inputs": {"pinned": dict(OLD)}
            }
    mixed = mixed_versions(journal, names)
    assert mixed["gpu-0001"] == "nvidia_driver_version=535.309.01"
    assert mixed["gpu-2000"] == "nvidia_driver_version=535.261.03"
    assert len(mixed) == 2000


def test_one_version_everywhere_shows_nothing(tmp_path: Path) -> None:
    journal = Journal("pt-same", tmp_path)
    for name in ("a", "b"):
        journal.record_certified(name, NEW, {})
    assert mixed_versions(journal, ["a", "b", "never-seen"]) == {}
