"""The software digest of a pool's image: what moves it (pins, the roles baked, the base image)
and what must not (the cluster's size, placement, the cluster part); why an image is stale."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from clusterforge.images.digest import SoftwareDigest, software_digest, stale_reasons
from clusterforge.spec.loader import REPO_ROOT, load_spec
from clusterforge.spec.models import ClusterSpec

BASE = "localhost/clusterforge-node:bookworm-0123456789ab"


@cache
def spec(stack: str = "local") -> ClusterSpec:
    return load_spec(REPO_ROOT / "stacks" / f"{stack}.yaml")[0]


def with_count(base: ClusterSpec, count: int) -> ClusterSpec:
    pools = [p.model_copy(update={"count": count}) if p.role == "gpu" else p for p in base.node_pools]
    return base.model_copy(update={"node_pools": pools})


def software(base: ClusterSpec, **changes: object) -> ClusterSpec:
    return base.model_copy(update={"software": base.software.model_copy(update=changes)})


def pool(cluster: ClusterSpec) -> str:
    return next(p.name for p in cluster.node_pools if p.role == "gpu")


def test_the_cluster_size_and_the_cluster_part_do_not_move_the_digest() -> None:
    small, large = spec(), with_count(spec(), 512)
    assert software_digest(small, pool(small), BASE) == software_digest(large, pool(large), BASE)
    d = software_digest(small, pool(small), BASE)
    baked = {k[5:] for k in d.parts if k.startswith("role ")}
    assert {"nvidia_driver", "container_runtime", "slurm", "validators_runtime"} <= baked
    assert not baked & {"node_image", "local_scratch", "common", "shared_storage", "monitoring", "pyxis"}


def test_a_pin_the_image_holds_moves_the_digest_and_is_named() -> None:
    old = software_digest(spec(), "node", BASE)
    bumped = spec().software.driver.model_copy(update={"version": "535.309.01"})
    new = software_digest(software(spec(), driver=bumped), "node", BASE)
    assert old.digest != new.digest
    reasons = stale_reasons(old, new)
    assert "nvidia_driver_version 535.261.03 -> 535.309.01" in reasons
    # fabric_manager follows the driver's version; only pins are named, no role twice.
    assert reasons == sorted(reasons) and all("535.261.03 -> 535.309.01" in r for r in reasons)


def test_a_slurm_version_moves_the_digest_but_not_its_config() -> None:
    cluster = spec()
    old = software_digest(cluster, "node", BASE)
    partitions = cluster.orchestration.model_copy(
        update={
            "partitions": [
                p.model_copy(update={"max_time": "1-00:00:00"}) for p in cluster.orchestration.partitions
            ]
        }
    )
    assert software_digest(cluster.model_copy(update={"orchestration": partitions}), "node", BASE) == old
    new = software_digest(software(cluster, slurm="23.11.4"), "node", BASE)
    assert "slurm_version 22.05.8 -> 23.11.4" in stale_reasons(old, new)


def test_a_new_base_image_is_a_new_image() -> None:
    old = software_digest(spec(), "node", BASE)
    new = software_digest(spec(), "node", BASE.replace("0123", "9999"))
    assert stale_reasons(old, new) == [f"base image {BASE} -> {BASE.replace('0123', '9999')}"]


def test_a_role_file_change_is_named_by_role(tmp_path: Path) -> None:
    import shutil

    for folder in ("roles", "playbooks", "validators"):
        shutil.copytree(REPO_ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    old = software_digest(spec(), "node", BASE, root=tmp_path)
    (tmp_path / "roles" / "nvidia_driver" / "tasks" / "main.yml").write_text("---\n[]\n")
    new = software_digest(spec(), "node", BASE, root=tmp_path)
    assert stale_reasons(old, new) == ["nvidia_driver: files or variables changed"]


def test_round_trip_and_equal_digests_are_not_stale() -> None:
    d = software_digest(spec(), "node", BASE)
    assert SoftwareDigest.from_dict(d.to_dict()) == d
    assert stale_reasons(d, d) == []


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_compute_pool_of_the_cloud_stacks_has_a_digest(stack: str) -> None:
    cluster = spec(stack)
    for p in cluster.node_pools:
        if p.role == "gpu":
            d = software_digest(cluster, p.name, "ami-0123456789abcdef0")
            assert (
                len(d.digest) == 16 and d.pins.get("nvidia_driver_version") == cluster.software.driver.version
            )
