"""The driver role's pin holds the whole dependency closure on a real node (Debian 12 container with
systemd, presented to the role as Ubuntu 22.04) against the Ubuntu-flavour stand-in of NVIDIA's
repository (tests/data/nvidia_repo/ubuntu2204.yaml: the real bounded Depends of nvidia-dkms on
nvidia-kernel-common/-source, the firmware package, a newer point release on each branch, and Ubuntu's
570.211.01 transitional packages that pull 580).

Before issue 23 the role pinned four packages and the first converge failed with apt's "Depends:
nvidia-kernel-common-570 (<= 570.133.20-1) but 570.211.01-0ubuntu1.22.04.1 is to be installed". Now:
every package of the closure at the pin, held, locked by a preferences file; a second run changes
nothing; nothing NVIDIA moves on a dist-upgrade; and the move prod made (570 -> 580) replaces the
held 570 set with 580's and its version-locking package."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusterforge.providers.local.config import COLLECTIONS_PATH, write_podman_config
from tests.fixtures import nvidia_repo
from tests.roles.gpu_play import PlayOutcome, run_play, write_inventory

# Opt-in (`long`) to keep CI under an hour: passed in the CI rehearsal of 2026-12-02 (146 s); apt's real
# resolver against the same stand-in runs in the slow tier (test_driver_closure_apt.py).
pytestmark = [pytest.mark.integration, pytest.mark.long]

NODE = "node-001"
PLAYBOOK = Path(__file__).resolve().parent / "playbooks" / "driver_closure.yml"
APT_CACHE = "/var/cache/clusterforge/apt-archives"  # the local provider's shared apt cache volume
CLOSURE = ["libnvidia-compute", "nvidia-utils", "nvidia-compute-utils", "nvidia-dkms-{b}-open"]
CLOSURE += ["nvidia-kernel-common", "nvidia-kernel-source-{b}-open"]


def names(branch: str) -> list[str]:
    return [n.format(b=branch) if "{b}" in n else f"{n}-{branch}" for n in CLOSURE]


@dataclass
class Node:
    stack: Any
    inventory: Path
    env: dict[str, str]
    work: Path

    def sh(self, script: str) -> str:
        return self.stack.exec(NODE, "sh", "-c", script)

    def installed(self, package: str) -> str:
        out = self.sh(f"dpkg-query -W -f='${{Status}} ${{Version}}' {package} 2>/dev/null || true").split()
        return out[3] if len(out) == 4 and out[2] == "installed" else ""

    def holds(self) -> set[str]:
        return set(self.sh("apt-mark showhold").split())

    def play(self, name: str, version: str) -> PlayOutcome:
        extravars = {"nvidia_driver_version": version, "nvidia_driver_branch": version.split(".")[0]}
        return run_play(self.work / name, self.inventory, self.env, extravars=extravars, playbook=PLAYBOOK)


@pytest.fixture(scope="module")
def node(
    container_stack: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[Node]:
    stack = container_stack(1)
    built = nvidia_repo.build(Path(pytestconfig.cache.mkdir("nvidia_repo")), nvidia_repo.UBUNTU_2204)
    # The machine-wide apt cache keeps .debs by file name: a stand-in rebuilt with other contents
    # under the same name and version would be taken from there. Only this flavour's files go.
    stack.exec(
        NODE,
        "sh",
        "-c",
        f"rm -f {APT_CACHE}/nvidia-*ubuntu1*_amd64.deb {APT_CACHE}/libnvidia-*ubuntu1*_amd64.deb",
    )
    gateway = nvidia_repo.podman_gateway(stack.engine(), f"clusterforge-{stack.spec.stack}")
    serving = nvidia_repo.serve(built, gateway)
    repo = next(serving)
    try:
        work = tmp_path_factory.mktemp("driver-closure")
        group_vars = {
            "nvidia_driver_kernel_module": "open",
            "nvidia_driver_source": "cuda-repo",
            "nvidia_driver_cuda_repo_url": repo.repo_url,
            "nvidia_driver_cuda_repo_key_url": repo.key_url,
            # The kernel module package is installed (and pins its closure); in a container the
            # headers, the DKMS check and the boot modules are skipped with a message.
            "nvidia_driver_kernel_module_install": True,
            "nvidia_driver_gpu_present": False,
        }
        inventory = write_inventory(
            work / "hosts.yml",
            {"ubuntu_nodes": {"hosts": {NODE: stack.node(NODE).connection}, "vars": group_vars}},
        )
        env = {**write_podman_config(), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH)}
        yield Node(stack, inventory, env, work)
    finally:
        serving.close()


def test_the_pin_holds_its_whole_closure_and_survives_a_branch_move(node: Node) -> None:
    first = node.play("first", "570.133.20")
    assert first.rc == 0, first.explain()
    pin = "570.133.20-0ubuntu1"
    for package in [*names("570"), "nvidia-firmware-570-570.133.20"]:
        assert node.installed(package) == pin, package
    assert set(names("570")) <= node.holds()
    prefs = node.sh("cat /etc/apt/preferences.d/clusterforge-nvidia-driver")
    assert "Pin: version 570.133.20-*ubuntu1\nPin-Priority: 1001" in prefs
    # No pinning package for 570.133.20 in the repository: said, not failed.
    assert any("SKIPPED: nvidia-driver-pinning-570.133.20" in m for m in first.messages.get(NODE, []))

    again = node.play("again", "570.133.20")
    assert again.rc == 0, again.explain()
    assert again.changed(NODE) == 0, again.changed_tasks

    # What an operator's `apt-get dist-upgrade` would do: nothing to the driver (held and pinned,
    # though 570.148.08 and Ubuntu's 570.211.01 are newer).
    upgrade = node.sh("apt-get --simulate dist-upgrade 2>&1")
    assert "nvidia" not in " ".join(line for line in upgrade.splitlines() if line.startswith("Inst ")), (
        upgrade
    )

    # prod's move: 580.105.08, whose version-locking package NVIDIA publishes. The held 570 set goes
    # (the 580 packages conflict with it), the 580 closure comes in at the pin, held.
    moved = node.play("to-580", "580.105.08")
    assert moved.rc == 0, moved.explain()
    for package in [*names("580"), "nvidia-firmware-580-580.105.08"]:
        assert node.installed(package) == "580.105.08-0ubuntu1", package
    assert node.installed("nvidia-driver-pinning-580.105.08") == "580.105.08-0ubuntu1"
    assert not [p for p in names("570") if node.installed(p)], "the 570 set is gone"
    holds = node.holds()
    assert set(names("580")) | {"nvidia-driver-pinning-580.105.08"} <= holds
    assert not holds & set(names("570"))
    assert "Pin: version 580.105.08-*ubuntu1" in node.sh(
        "cat /etc/apt/preferences.d/clusterforge-nvidia-driver"
    )
