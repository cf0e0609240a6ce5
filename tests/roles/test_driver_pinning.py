"""The 590 naming scheme on a real container node (Debian 12, systemd): NVIDIA's version-locking
package nvidia-driver-pinning-<version> goes in before the driver and is held, an upgrade to another
590 release replaces it, and Fabric Manager from 580 is nvidia-fabricmanager + libnvidia-nscq at the
driver's version; an NVLink5 node also gets nvlsm (held), infiniband-diags and ib_umad at boot.
Packages come from the signed stand-in repository (tests/fixtures/nvidia_repo.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusterforge.providers.local.config import COLLECTIONS_PATH, write_podman_config
from tests.fixtures import nvidia_repo
from tests.roles.gpu_play import PlayOutcome, run_play, write_inventory

pytestmark = pytest.mark.integration

NODE = "node-001"
PLAYBOOK = Path(__file__).resolve().parent / "playbooks" / "driver_pinning.yml"
FIRST, NEXT = "590.44.01", "590.48.01"


@dataclass
class Node:
    stack: Any
    repo: nvidia_repo.NvidiaRepo
    inventory: Path
    env: dict[str, str]
    work: Path

    def sh(self, script: str, check: bool = True) -> str:
        return self.stack.exec(NODE, "sh", "-c", script, check=check)

    def installed(self, package: str) -> str:
        """The installed version ("" when not installed); the selection (install/hold) is not part of it."""
        out = self.sh(f"dpkg-query -W -f='${{Status}} ${{Version}}' {package} 2>/dev/null || true").split()
        return out[3] if len(out) == 4 and out[2] == "installed" else ""

    def holds(self) -> set[str]:
        return set(self.sh("apt-mark showhold").split())

    def play(self, name: str, version: str) -> PlayOutcome:
        versions = {
            "nvidia_driver_version": version,
            "fabric_manager_version": version,
            "fabric_manager_driver_version": version,
        }
        return run_play(self.work / name, self.inventory, self.env, extravars=versions, playbook=PLAYBOOK)


@pytest.fixture(scope="module")
def node(
    container_stack: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[Node]:
    stack = container_stack(1)
    built = nvidia_repo.build(Path(pytestconfig.cache.mkdir("nvidia_repo")))
    gateway = nvidia_repo.podman_gateway(stack.engine(), f"clusterforge-{stack.spec.stack}")
    serving = nvidia_repo.serve(built, gateway)
    repo = next(serving)
    try:
        work = tmp_path_factory.mktemp("driver-pinning")
        group_vars = {
            "nvidia_driver_branch": "590",
            "nvidia_driver_kernel_module": "open",
            "nvidia_driver_source": "cuda-repo",
            "nvidia_driver_cuda_repo_url": repo.repo_url,
            "nvidia_driver_cuda_repo_key_url": repo.key_url,
            "nvidia_driver_kernel_module_install": False,
            "fabric_manager_enabled": True,
            "fabric_manager_nvlink5": True,
        }
        inventory = write_inventory(
            work / "hosts.yml",
            {"cuda_repo_nodes": {"hosts": {NODE: stack.node(NODE).connection}, "vars": group_vars}},
        )
        env = {**write_podman_config(), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH)}
        yield Node(stack, repo, inventory, env, work)
    finally:
        serving.close()


def test_pinning_package_installed_held_and_replaced_on_upgrade(node: Node) -> None:
    first = node.play("first", FIRST)
    assert first.rc == 0, first.explain()
    assert node.installed("nvidia-driver-cuda") == f"{FIRST}-1"
    assert node.installed(f"nvidia-driver-pinning-{FIRST}") == f"{FIRST}-1"
    holds = node.holds()
    assert {f"nvidia-driver-pinning-{FIRST}", "nvidia-driver-cuda", "nvidia-smi"} <= holds
    # Fabric Manager from 580: no branch in the names, NSCQ and NVSDM at the driver's version, held.
    for package in ("nvidia-fabricmanager", "libnvidia-nscq", "libnvsdm"):
        assert node.installed(package) == f"{FIRST}-1"
        assert package in holds
    # NVLink5: nvlsm at the repository's (dated) version, held; infiniband-diags; ib_umad at boot.
    assert node.installed("nvlsm") == "2025.10.14-1" and "nvlsm" in holds
    assert node.installed("infiniband-diags")
    conf = node.sh("cat /etc/modules-load.d/clusterforge-fabric-manager.conf")
    assert "ib_umad" in conf.splitlines()
    assert any("SKIPPED (container): ib_umad" in m for m in first.messages.get(NODE, []))

    again = node.play("again", FIRST)
    assert again.rc == 0, again.explain()
    assert again.changed(NODE) == 0, again.changed_tasks

    upgrade = node.play("upgrade", NEXT)
    assert upgrade.rc == 0, upgrade.explain()
    assert node.installed("nvidia-driver-cuda") == f"{NEXT}-1"
    assert node.installed(f"nvidia-driver-pinning-{NEXT}") == f"{NEXT}-1"
    # The old version's lock is gone (it would keep apt on the old driver).
    assert node.installed(f"nvidia-driver-pinning-{FIRST}") == ""
    holds = node.holds()
    assert f"nvidia-driver-pinning-{NEXT}" in holds and f"nvidia-driver-pinning-{FIRST}" not in holds
    assert node.installed("nvidia-fabricmanager") == f"{NEXT}-1"
