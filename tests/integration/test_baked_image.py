"""A node image baked for real on the local stack, and one node booted from it (issue 24).

One bake (builder container: node_software.yml, the pool's quick checks, the record, podman commit),
then one compute node from the baked image: node_software.yml skips the node software there (the
image's digest and every recorded item match: no change at all); after a held package of the image
is unheld on the node, the same playbook converges the node software again and puts the hold back;
after that the node skips again. A second bake of the same software registers nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterforge.ansible.runner import PlaybookResult, PlaybookRun
from clusterforge.images.bake import bake_pool
from clusterforge.images.boot import boot_digests
from clusterforge.images.local import LocalBuilder
from clusterforge.images.record import ImageRecord
from clusterforge.inventory import render_inventory, write_inventory
from clusterforge.journal import stack_dir
from clusterforge.pipeline.context import stack_env
from clusterforge.providers.local import LocalProvider
from clusterforge.providers.local.engine import detect_engine
from clusterforge.spec.loader import REPO_ROOT, load_spec, stack_path
from clusterforge.spec.models import ClusterSpec
from tests.fixtures.nodes import LocalStack, _free_cidr

# Opt-in (`long`): a bake converges the whole node software on a builder (minutes); the rehearsal of
# 2026-12-02 failed its setup on a run id certify.yml refused (fixed since, with a unit test), and the
# rest of it has not run since.
pytestmark = [pytest.mark.integration, pytest.mark.long]

GPU_ROLES = ("nvidia_driver", "cuda_toolkit", "nccl", "efa", "fabric_manager", "dcgm", "container_runtime")


@dataclass
class Baked:
    spec: ClusterSpec
    record: ImageRecord
    stack: LocalStack
    inventory: Path
    env: dict[str, str]


def _spec(stack: str, engine_cidr: object) -> ClusterSpec:
    base, _ = load_spec(stack_path("local"))
    pools = [p.model_copy(update={"count": 1, "image": "baked"}) for p in base.node_pools if p.role == "gpu"]
    provider = base.provider.model_copy(update={"network_cidr": engine_cidr})
    return base.model_copy(update={"stack": stack, "node_pools": pools, "provider": provider})


@pytest.fixture(scope="module")
def baked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Baked]:
    engine = detect_engine("auto")
    provider = LocalProvider(engine)
    spec = _spec(f"pt{os.getpid()}-bk", _free_cidr(engine))
    work = tmp_path_factory.mktemp("baked")
    os.environ["CLUSTERFORGE_STATE_DIR"] = str(work / "state")
    env = stack_env(spec, stack_dir(spec.stack))
    record = None
    try:
        record = bake_pool(spec, "node", LocalBuilder(provider), env, progress=print)
        nodes = provider.create(spec)
        inventory = write_inventory(
            render_inventory(
                spec, nodes, stack_dir(spec.stack) / "munge.key", image_digests=boot_digests(spec, print)
            ),
            work / "inventory",
        )
        yield Baked(spec, record, LocalStack(spec, provider, nodes), inventory, env)
    finally:
        provider.destroy(spec)
        if record is not None:
            engine.run("rmi", record.image, check=False)
        os.environ.pop("CLUSTERFORGE_STATE_DIR", None)


def _software(b: Baked) -> PlaybookResult:
    run = PlaybookRun(
        REPO_ROOT / "playbooks" / "node_software.yml",
        b.inventory,
        stack_dir(b.spec.stack) / "runs",
        env=b.env,
    )
    result = run.run()
    assert result.host_ok("node-001"), result.failures
    return result


def test_the_bake_recorded_a_checked_image(baked: Baked) -> None:
    assert baked.record.checks.startswith("pass") and baked.record.items > 10
    node = baked.stack.node("node-001")
    labels = baked.stack.engine().json("image", "inspect", baked.record.image)[0]["Config"]["Labels"]
    assert labels["clusterforge.software_digest"] == baked.record.digest
    # What was the builder's own is not in the image.
    assert (
        baked.stack.exec(
            "node-001", "sh", "-c", "test -e /etc/clusterforge/node.json && echo yes || echo no"
        ).strip()
        == "no"
    )
    assert node.state == "running"


def test_a_node_booted_from_it_skips_the_node_software_then_repairs_drift(baked: Baked) -> None:
    first = _software(baked)
    host = first.hosts["node-001"]
    assert host.changed == 0, host.changed_tasks
    assert not any(t.split(" : ")[0] in GPU_ROLES for t in host.changed_tasks)
    # Drift on the node: a held package of the image unheld by hand.
    held = baked.stack.exec("node-001", "apt-mark", "showhold").split()
    assert "slurmd" in held
    baked.stack.exec("node-001", "apt-mark", "unhold", "slurmd")
    repaired = _software(baked)
    assert repaired.hosts["node-001"].changed > 0
    assert "slurmd" in baked.stack.exec("node-001", "apt-mark", "showhold").split()
    again = _software(baked)
    assert again.hosts["node-001"].changed == 0


def test_the_same_software_is_not_baked_twice(baked: Baked) -> None:
    lines: list[str] = []
    record = bake_pool(
        baked.spec, "node", LocalBuilder(baked.stack.provider), baked.env, progress=lines.append
    )
    assert record.image == baked.record.image and "not baked again" in lines[-1]
