"""Converge the GPU roles on real container nodes (Debian 12, systemd as PID 1).

node-001 gets the whole stack from a local, signed stand-in for NVIDIA's CUDA repository
(tests/fixtures/nvidia_repo.py: real package names and versions, stub payloads); node-002 gets
the driver userland (535) from Debian's own non-free archive. Then: a second run changes
nothing, pins and holds are in place, GPU-only steps say they were skipped, and a package
downgraded by hand is reported by --check and put back by a normal run.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clusterforge.providers.local.config import COLLECTIONS_PATH, write_podman_config
from tests.fixtures import nvidia_repo
from tests.roles.gpu_play import PlayOutcome, run_play, write_inventory

pytestmark = pytest.mark.integration

CUDA_NODE = "node-001"
DISTRO_NODE = "node-002"
# Debian 12 non-free's 535 userland as in bookworm (point release 12.12+); the spec's value on a
# real cluster. The 535.247.01 of stacks/local.yaml is no longer in the archive.
DISTRO_DRIVER = "535.261.03"
DISTRO_PACKAGES = ["nvidia-smi", "libnvidia-ml1", "libcuda1"]


@dataclass
class Converged:
    stack: Any
    repo: nvidia_repo.NvidiaRepo
    inventory: Path
    env: dict[str, str]
    work: Path
    first: PlayOutcome
    second: PlayOutcome

    def sh(self, node: str, script: str, check: bool = True) -> str:
        return self.stack.exec(node, "sh", "-c", script, check=check)

    def installed(self, node: str, package: str) -> str:
        return self.sh(node, f"dpkg-query -W -f='${{Version}}' {package}").strip()

    def holds(self, node: str) -> set[str]:
        return set(self.sh(node, "apt-mark showhold").split())

    def play(
        self,
        name: str,
        *,
        check: bool = False,
        limit: str | None = None,
        extravars: dict[str, Any] | None = None,
    ) -> PlayOutcome:
        return run_play(
            self.work / name, self.inventory, self.env, check=check, limit=limit, extravars=extravars
        )


def _group_vars(repo: nvidia_repo.NvidiaRepo) -> dict[str, dict[str, Any]]:
    """The group_vars the pipeline renders from a spec (see docs/INTERFACES.md, gpu roles)."""
    enroot_base = repo.url + "/" + repo.files["enroot"].split("/v3.5.0/")[0]
    cuda_repo = {
        "nvidia_driver_branch": "570",
        "nvidia_driver_version": "570.133.20",
        "nvidia_driver_kernel_module": "open",
        "nvidia_driver_source": "cuda-repo",
        "nvidia_driver_cuda_repo_url": repo.repo_url,
        "nvidia_driver_cuda_repo_key_url": repo.key_url,
        "cuda_toolkit_version": "12.8.1",
        "nccl_version": "2.26.2",
        "nccl_cuda_version": "12.8.1",
        "nccl_tests_version": "2.14.1",
        "dcgm_version": "4.2.3",
        "fabric_manager_enabled": True,
        "fabric_manager_version": "570.133.20",
        "fabric_manager_driver_version": "570.133.20",
        "container_runtime_toolkit_version": "1.17.5",
        "container_runtime_enroot_version": "3.5.0",
        "container_runtime_enroot_release_url": enroot_base,
        "efa_enabled": False,
    }
    distro = {
        "nvidia_driver_branch": "535",
        "nvidia_driver_version": DISTRO_DRIVER,
        "nvidia_driver_kernel_module": "proprietary",
        "nvidia_driver_source": "distro",
        # Containers share the host's kernel: no DKMS module to build or load.
        "nvidia_driver_kernel_module_install": False,
    }
    return {"cuda_repo_nodes": cuda_repo, "distro_nodes": distro}


@pytest.fixture(scope="module")
def converged(
    container_stack: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config
) -> Iterator[Converged]:
    stack = container_stack(2)
    built = nvidia_repo.build(Path(pytestconfig.cache.mkdir("nvidia_repo")))
    gateway = nvidia_repo.podman_gateway(stack.engine(), f"clusterforge-{stack.spec.stack}")
    serving = nvidia_repo.serve(built, gateway)
    repo = next(serving)
    try:
        work = tmp_path_factory.mktemp("gpu-roles")
        gv = _group_vars(repo)
        inventory = write_inventory(
            work / "hosts.yml",
            {
                "cuda_repo_nodes": {
                    "hosts": {CUDA_NODE: stack.node(CUDA_NODE).connection},
                    "vars": gv["cuda_repo_nodes"],
                },
                "distro_nodes": {
                    "hosts": {DISTRO_NODE: stack.node(DISTRO_NODE).connection},
                    "vars": gv["distro_nodes"],
                },
            },
        )
        env = {**write_podman_config(), "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH)}
        first = run_play(work / "first", inventory, env)
        assert first.rc == 0, first.explain()
        second = run_play(work / "second", inventory, env)
        assert second.rc == 0, second.explain()
        yield Converged(stack, repo, inventory, env, work, first, second)
    finally:
        serving.close()


def test_first_run_installs_and_second_changes_nothing(converged: Converged) -> None:
    assert converged.first.changed(CUDA_NODE) > 0
    assert converged.first.changed(DISTRO_NODE) > 0
    assert converged.second.changed(CUDA_NODE) == 0, converged.second.changed_tasks
    assert converged.second.changed(DISTRO_NODE) == 0, converged.second.changed_tasks


@pytest.mark.parametrize(
    "package",
    [
        "nvidia-driver-cuda",
        "nvidia-kernel-open-dkms",
        "nvidia-smi",
        "cuda-toolkit-12-8",
        "libnccl2",
        "libnccl-dev",
        "datacenter-gpu-manager-4-core",
        "datacenter-gpu-manager-4-cuda12",
        "nvidia-fabricmanager-570",
        "libnvidia-nscq-570",
        "libnvsdm-570",
        "nvidia-container-toolkit",
        "libnvidia-container1",
    ],
)
def test_cuda_repo_packages_pinned_and_held(converged: Converged, package: str) -> None:
    assert converged.installed(CUDA_NODE, package) == converged.repo.pinned(package)
    assert package in converged.holds(CUDA_NODE)


def test_enroot_from_release_files_pinned_and_held(converged: Converged) -> None:
    for package in ("enroot", "enroot+caps"):
        assert converged.installed(CUDA_NODE, package) == "3.5.0-1"
        assert package in converged.holds(CUDA_NODE)
    # enroot's folders: its drop-in names them, their shared parents exist world-writable and sticky.
    conf = converged.sh(CUDA_NODE, "cat /etc/enroot/enroot.conf.d/10-clusterforge.conf")
    assert "ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)" in conf
    assert "ENROOT_DATA_PATH /var/lib/enroot/data/user-$(id -u)" in conf
    modes = converged.sh(
        CUDA_NODE, "stat -c %a /run/enroot /var/lib/enroot/cache /var/lib/enroot/data"
    ).split()
    assert modes == ["1777", "1777", "1777"]


def test_distro_driver_userland_from_debian_non_free(converged: Converged) -> None:
    holds = converged.holds(DISTRO_NODE)
    for package in DISTRO_PACKAGES:
        assert converged.installed(DISTRO_NODE, package).startswith(DISTRO_DRIVER + "-")
        assert package in holds
    # Debian builds nvidia-persistenced from its own source (its own version): held, not pinned.
    assert "nvidia-persistenced" in holds
    assert converged.sh(DISTRO_NODE, "systemctl is-enabled nvidia-persistenced").strip() == "enabled"
    # The real nvidia-smi is there, and without a GPU it fails with its own message.
    out = converged.sh(DISTRO_NODE, "nvidia-smi 2>&1; echo rc=$?", check=False)
    assert "rc=0" not in out


def test_cuda_environment_for_users(converged: Converged) -> None:
    out = converged.sh(
        CUDA_NODE, "env -i sh -c '. /etc/profile.d/cuda.sh; echo $PATH; echo $LD_LIBRARY_PATH'"
    )
    path, ld_path = out.splitlines()[:2]
    assert path.split(":")[0] == "/usr/local/cuda-12.8/bin"
    assert ld_path == "/usr/local/cuda-12.8/lib64"


def test_services_enabled_not_started_without_gpu(converged: Converged) -> None:
    for unit in ("nvidia-persistenced", "nvidia-dcgm", "nvidia-fabricmanager"):
        assert converged.sh(CUDA_NODE, f"systemctl is-enabled {unit}").strip() == "enabled"
        assert converged.sh(CUDA_NODE, f"systemctl is-active {unit}", check=False).strip() != "active"


def test_gpu_only_steps_reported_skipped(converged: Converged) -> None:
    msgs = "\n".join(converged.first.messages.get(CUDA_NODE, []))
    assert "SKIPPED (no GPU)" in msgs and "NOT claimed loaded" in msgs
    assert "nvidia-dcgm is enabled but not started" in msgs
    assert "nvidia-fabricmanager is enabled but not started" in msgs
    assert "SKIPPED nccl-tests 2.14.1 build: no nvcc" in msgs
    assert "SKIPPED: efa_enabled is false" in msgs
    assert "NOT claimed loaded" in "\n".join(converged.first.messages.get(DISTRO_NODE, []))


def test_drift_is_reported_by_check_and_repaired(converged: Converged) -> None:
    old = converged.repo.drift("libnccl2")
    converged.sh(
        CUDA_NODE,
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --allow-downgrades --allow-change-held-packages "
        f"libnccl2={old} libnccl-dev={old} >/dev/null",
    )
    assert converged.installed(CUDA_NODE, "libnccl2") == old

    # --check: the drifted packages are the only change it reports (the rest of the converged
    # stack, pins, holds, repository and units, and the untouched distro node report nothing).
    check = converged.play("drift-check", check=True)
    assert check.rc == 0, check.explain()
    assert check.changed(DISTRO_NODE) == 0, check.changed_tasks
    # apt-get --allow-change-held-packages also drops the hold: the role reports re-holding too.
    nccl_tasks = {"Install NCCL 2.26.2-1+cuda12.8", "Hold the NCCL packages"}
    changed = check.changed_tasks.get(CUDA_NODE, [])
    assert "Install NCCL 2.26.2-1+cuda12.8" in changed and set(changed) <= nccl_tasks, check.changed_tasks
    assert converged.installed(CUDA_NODE, "libnccl2") == old, "--check must not change the node"

    repair = converged.play("drift-repair", limit=CUDA_NODE)
    assert repair.rc == 0, repair.explain()
    assert set(repair.changed_tasks.get(CUDA_NODE, [])) == set(changed), repair.changed_tasks
    assert converged.installed(CUDA_NODE, "libnccl2") == converged.repo.pinned("libnccl2")
    assert converged.installed(CUDA_NODE, "libnccl-dev") == converged.repo.pinned("libnccl-dev")
    assert {"libnccl2", "libnccl-dev"} <= converged.holds(CUDA_NODE)


def test_driver_version_missing_from_the_archive_is_named(converged: Converged) -> None:
    # The failure the local stack met: a 535 release Debian no longer carries. The role stops before
    # installing anything and lists what the archive offers.
    gone = converged.play("gone", limit=DISTRO_NODE, extravars={"nvidia_driver_version": "535.247.01"})
    assert gone.rc != 0
    message = " ".join(gone.failures.get(DISTRO_NODE, []))
    # every package of the pin is checked (issue 23), and the ones the source lacks are named
    assert "nvidia-smi" in message and "are not offered at 535.247.01-* by the distro source" in message, (
        gone.explain()
    )
    assert f"{DISTRO_DRIVER}-" in message and "Set software.driver.version" in message
    assert not gone.changed_tasks.get(DISTRO_NODE), gone.changed_tasks
    assert converged.installed(DISTRO_NODE, "nvidia-smi").startswith(DISTRO_DRIVER + "-")


def test_nccl_build_missing_for_the_cuda_minor_is_named(converged: Converged) -> None:
    # NCCL 2.26.2 exists for CUDA 12.8 only here: a spec with CUDA 12.4 would pin a build that does
    # not exist. The role stops before installing and names the builds that do.
    wrong = converged.play("nccl-cuda", limit=CUDA_NODE, extravars={"nccl_cuda_version": "12.4.1"})
    assert wrong.rc != 0
    message = " ".join(wrong.failures.get(CUDA_NODE, []))
    assert "libnccl2=2.26.2-1+cuda12.4 is not offered" in message, wrong.explain()
    assert "NCCL 2.26.2 is offered as: 2.26.2-1+cuda12.8" in message
    assert not wrong.changed_tasks.get(CUDA_NODE), wrong.changed_tasks


def test_repo_is_signed_and_indexed(converged: Converged) -> None:
    root = converged.repo.root / converged.repo.repo_path
    packages = (root / "Packages").read_text()
    assert "Package: nvidia-fabricmanager-570\nVersion: 570.133.20-1" in packages
    verify = subprocess.run(
        ["gpg", "--verify", str(root / "Release.gpg"), str(root / "Release")], capture_output=True
    )
    # No keyring here trusts the throw-away key; gpg still parses a valid signature.
    assert b"Signature made" in verify.stderr
