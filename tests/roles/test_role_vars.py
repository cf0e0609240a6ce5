"""The package names and versions the roles compute per distribution, branch and kernel, rendered
by Ansible's own templating from each role's defaults and vars files (no node, no repository:
NVIDIA's repositories and Ubuntu's archive are out of reach here), against a table of the names
their publishers document. Each row says where its names come from.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLES = Path(__file__).resolve().parents[2] / "roles"

FACTS = {
    "ubuntu-22.04": {
        "distribution": "Ubuntu",
        "distribution_version": "22.04",
        "distribution_major_version": "22",
        "os_family": "Debian",
        "kernel": "6.8.0-1021-aws",
    },
    "ubuntu-24.04": {
        "distribution": "Ubuntu",
        "distribution_version": "24.04",
        "distribution_major_version": "24",
        "os_family": "Debian",
        "kernel": "6.8.0-1024-aws",
    },
    "debian-12": {
        "distribution": "Debian",
        "distribution_version": "12.12",
        "distribution_major_version": "12",
        "os_family": "Debian",
        "kernel": "6.1.0-40-cloud-amd64",
    },
}
OS_VARS = {
    "ubuntu-22.04": "Ubuntu-22.04.yml",
    "ubuntu-24.04": "Ubuntu-24.04.yml",
    "debian-12": "Debian-12.yml",
}


def _trusted(value: Any) -> Any:
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    return value


def render(role: str, os_image: str | None, expr: str, **overrides: Any) -> Any:
    """``expr`` templated with the role's defaults, vars/main.yml and its OS vars file, as Ansible
    layers them (OS vars over main vars over defaults, the test's variables over all)."""
    variables: dict[str, Any] = {}
    for rel in ("defaults/main.yml", "vars/main.yml", f"vars/{OS_VARS[os_image]}" if os_image else ""):
        path = ROLES / role / rel
        if rel and path.is_file():
            variables.update(yaml.safe_load(path.read_text()) or {})
    variables["ansible_facts"] = FACTS[os_image or "debian-12"]
    variables.update(overrides)
    templar = Templar(loader=DataLoader(), variables=_trusted(variables))
    return templar.template(trust_as_template(expr))


# (os image, branch, version, module, source) -> pinned packages, pin, headers. Sources:
# - Ubuntu: the branch-named packages of nvidia-graphics-drivers-<branch> (packages.ubuntu.com,
#   source nvidia-graphics-drivers-590: libnvidia-compute-590, nvidia-compute-utils-590,
#   nvidia-dkms-590, nvidia-dkms-590-open; nvidia-utils-<branch>), NVIDIA's revision -0ubuntu1;
#   580 keeps the branch (NVIDIA's 580 instructions: libnvidia-compute-580 nvidia-utils-580 nvidia-dkms-580).
# - Debian 12, CUDA repository: NVIDIA driver installation guide, Debian, compute-only
#   (nvidia-driver-cuda + nvidia-kernel-open-dkms), revision -1.
# - Debian 12, distro: Debian bookworm non-free (apt-cache show nvidia-kernel-dkms: 535.261.03-1,
#   Depends firmware-nvidia-gsp from non-free-firmware).
# - Headers: the running kernel's (NVIDIA guide, "Pre-installation Actions") and its flavour's meta
#   package, linux-headers-aws (Ubuntu's linux-aws) and linux-headers-cloud-amd64 (Debian).
DRIVER_TABLE = [
    (
        ("ubuntu-22.04", "570", "570.133.20", "open", "cuda-repo"),
        ["libnvidia-compute-570", "nvidia-utils-570", "nvidia-compute-utils-570", "nvidia-dkms-570-open"],
        "570.133.20-0ubuntu1",
        ["linux-headers-6.8.0-1021-aws", "linux-headers-aws"],
    ),
    (
        ("ubuntu-24.04", "580", "580.95.05", "proprietary", "cuda-repo"),
        ["libnvidia-compute-580", "nvidia-utils-580", "nvidia-compute-utils-580", "nvidia-dkms-580"],
        "580.95.05-0ubuntu1",
        ["linux-headers-6.8.0-1024-aws", "linux-headers-aws"],
    ),
    (
        ("debian-12", "570", "570.133.20", "open", "cuda-repo"),
        ["nvidia-driver-cuda", "nvidia-persistenced", "nvidia-smi", "libcuda1", "libnvidia-ml1"]
        + ["nvidia-kernel-open-dkms"],
        "570.133.20-1",
        ["linux-headers-6.1.0-40-cloud-amd64", "linux-headers-cloud-amd64"],
    ),
    (
        ("debian-12", "535", "535.261.03", "proprietary", "distro"),
        ["nvidia-smi", "libnvidia-ml1", "libcuda1", "nvidia-alternative", "libnvidia-ptxjitcompiler1"]
        + ["libnvidia-pkcs11-openssl3", "nvidia-kernel-dkms"],
        "535.261.03-*",
        ["linux-headers-6.1.0-40-cloud-amd64", "linux-headers-cloud-amd64"],
    ),
]


@pytest.mark.parametrize(
    ("case", "packages", "pin", "headers"), DRIVER_TABLE, ids=["-".join(r[0][:2]) for r in DRIVER_TABLE]
)
def test_driver_packages_are_the_documented_names(
    case: tuple[str, ...], packages: list[str], pin: str, headers: list[str]
) -> None:
    os_image, branch, version, module, source = case
    given = {
        "nvidia_driver_branch": branch,
        "nvidia_driver_version": version,
        "nvidia_driver_kernel_module": module,
        "nvidia_driver_source": source,
    }
    assert render("nvidia_driver", os_image, "{{ _nvidia_driver_pinned }}", **given) == packages
    assert render("nvidia_driver", os_image, "{{ _nvidia_driver_pin }}", **given) == pin
    assert render("nvidia_driver", os_image, "{{ _nvidia_driver_headers }}", **given) == headers


@pytest.mark.parametrize(
    ("kernel", "flavour"),
    [
        ("6.8.0-1021-aws", "aws"),  # Ubuntu on EC2 (linux-aws)
        ("5.15.0-125-generic", "generic"),
        ("6.1.0-40-cloud-amd64", "cloud-amd64"),  # Debian's cloud kernel
        ("6.1.0-40-amd64", "amd64"),
        ("6.12.12+bpo-cloud-amd64", ""),  # no ABI number: not guessed, preflight asks for the names
        ("6.9.0", ""),
    ],
)
def test_kernel_flavour_names_the_headers_meta_package(kernel: str, flavour: str) -> None:
    facts = {**FACTS["ubuntu-22.04"], "kernel": kernel}
    assert render(
        "nvidia_driver", "ubuntu-22.04", "{{ _nvidia_driver_kernel_flavour }}", ansible_facts=facts
    ) == (flavour)


def test_container_nodes_install_no_kernel_module_package() -> None:
    given = {"nvidia_driver_version": "535.261.03", "nvidia_driver_source": "distro"}
    pinned = render(
        "nvidia_driver",
        "debian-12",
        "{{ _nvidia_driver_pinned }}",
        nvidia_driver_kernel_module_install=False,
        **given,
    )
    assert not [p for p in pinned if "dkms" in p]


@pytest.mark.parametrize(
    ("version", "package", "pin"),
    [
        # NVIDIA's CUDA repository (debian12 listing): the branch is in the name up to 575, not from 580.
        ("570.133.20", "nvidia-fabricmanager-570", "570.133.20-1"),
        ("575.57.08", "nvidia-fabricmanager-575", "575.57.08-1"),
        ("580.65.06", "nvidia-fabricmanager", "580.65.06-1"),
    ],
)
def test_fabric_manager_package_name_per_branch(version: str, package: str, pin: str) -> None:
    got = render(
        "fabric_manager",
        "ubuntu-22.04",
        "{{ [_fabric_manager_package, _fabric_manager_pin] }}",
        fabric_manager_version=version,
    )
    assert got == [package, pin]


def test_enroot_folders_and_their_shared_parents() -> None:
    parents = render("container_runtime", "debian-12", "{{ _container_runtime_enroot_base_dirs }}")
    assert parents == ["/run/enroot", "/var/lib/enroot/cache", "/var/lib/enroot/data"]


def test_pyxis_build_folder_follows_the_slurm_headers() -> None:
    def header(number: str) -> dict[str, str]:
        return {"content": base64.b64encode(f"#define SLURM_VERSION_NUMBER {number}\n".encode()).decode()}

    def folder(number: str) -> tuple[str, str]:
        values = render(
            "pyxis",
            None,
            "{{ [_pyxis_src, _pyxis_slurm_version] }}",
            pyxis_version="0.21.0",
            __pyxis_slurm_version_h=header(number),
        )
        return values[0], values[1]

    # Debian 12's libslurm-dev 22.05.8 (slurm_version.h: SLURM_VERSION_NUMBER 0x160508).
    assert folder("0x160508") == ("/usr/local/src/pyxis-0.21.0-slurm-160508", "22.05.8")
    # A Slurm upgrade names another folder: the plugin is rebuilt against the new headers.
    assert folder("0x180507") == ("/usr/local/src/pyxis-0.21.0-slurm-180507", "24.05.7")
