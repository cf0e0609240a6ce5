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

from clusterforge.catalog import load_compat

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


# (os image, branch, version, module, source) -> pinned packages, pin, headers, source. Sources:
RECENT_UPDATES = (
    "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/recent-updates.html ('Starting with "
    "branch 590, the Ubuntu packages will be renamed by removing the branch designation from the package "
    "name': libnvidia-compute-580 -> libnvidia-compute, nvidia-dkms-580(-open) -> nvidia-dkms(-open))"
)
UBUNTU_590_LIST = (
    "https://github.com/dsx-ai-factory/infra-controller/pull/6049 (590 package list against NVIDIA's "
    "ubuntu2404 repository: libnvidia-compute, nvidia-compute-utils, nvidia-utils, nvidia-dkms-open)"
)
UBUNTU_REVISION = (
    "NVIDIA's Ubuntu revisions -0ubuntu1 (570.133.20-0ubuntu1) and -1ubuntu1 (580.126.16-1ubuntu1 in "
    "infra-controller pull 6049; 595.71.05-1ubuntu1 in https://github.com/NVIDIA/gpu-driver-container/pull/899)"
)
DEBIAN_GUIDE = (
    "NVIDIA driver installation guide, Debian, compute-only (nvidia-driver-cuda + nvidia-kernel-open-dkms), "
    "revision -1; Debian names carry no branch on any branch"
)
DEBIAN_DISTRO = (
    "Debian bookworm non-free (apt-cache show nvidia-kernel-dkms: 535.261.03-1, Depends firmware-nvidia-gsp)"
)
# Headers: the running kernel's (NVIDIA guide, "Pre-installation Actions") and its flavour's meta
# package, linux-headers-aws (Ubuntu's linux-aws) and linux-headers-cloud-amd64 (Debian).
UBUNTU_22_HEADERS = ["linux-headers-6.8.0-1021-aws", "linux-headers-aws"]
UBUNTU_24_HEADERS = ["linux-headers-6.8.0-1024-aws", "linux-headers-aws"]
DEBIAN_HEADERS = ["linux-headers-6.1.0-40-cloud-amd64", "linux-headers-cloud-amd64"]
DEBIAN_CUDA_REPO = ["nvidia-driver-cuda", "nvidia-persistenced", "nvidia-smi", "libcuda1", "libnvidia-ml1"]
DRIVER_TABLE = [
    (
        ("ubuntu-22.04", "535", "535.261.03", "proprietary", "cuda-repo"),
        ["libnvidia-compute-535", "nvidia-utils-535", "nvidia-compute-utils-535", "nvidia-dkms-535"],
        "535.261.03-*ubuntu1",
        UBUNTU_22_HEADERS,
        RECENT_UPDATES + "; " + UBUNTU_REVISION,
    ),
    (
        ("ubuntu-22.04", "570", "570.133.20", "open", "cuda-repo"),
        ["libnvidia-compute-570", "nvidia-utils-570", "nvidia-compute-utils-570", "nvidia-dkms-570-open"],
        "570.133.20-*ubuntu1",
        UBUNTU_22_HEADERS,
        RECENT_UPDATES + "; " + UBUNTU_REVISION,
    ),
    (
        # 580 keeps the branch (NVIDIA's 580 instructions: libnvidia-compute-580 nvidia-utils-580 nvidia-dkms-580).
        ("ubuntu-24.04", "580", "580.95.05", "proprietary", "cuda-repo"),
        ["libnvidia-compute-580", "nvidia-utils-580", "nvidia-compute-utils-580", "nvidia-dkms-580"],
        "580.95.05-*ubuntu1",
        UBUNTU_24_HEADERS,
        RECENT_UPDATES + "; " + UBUNTU_REVISION,
    ),
    (
        ("ubuntu-24.04", "590", "590.48.01", "open", "cuda-repo"),
        ["libnvidia-compute", "nvidia-utils", "nvidia-compute-utils", "nvidia-dkms-open"],
        "590.48.01-*ubuntu1",
        UBUNTU_24_HEADERS,
        RECENT_UPDATES + "; " + UBUNTU_590_LIST,
    ),
    (
        ("ubuntu-22.04", "595", "595.71.05", "proprietary", "cuda-repo"),
        ["libnvidia-compute", "nvidia-utils", "nvidia-compute-utils", "nvidia-dkms"],
        "595.71.05-*ubuntu1",
        UBUNTU_22_HEADERS,
        RECENT_UPDATES + "; " + UBUNTU_REVISION,
    ),
    (
        ("debian-12", "570", "570.133.20", "open", "cuda-repo"),
        DEBIAN_CUDA_REPO + ["nvidia-kernel-open-dkms"],
        "570.133.20-1",
        DEBIAN_HEADERS,
        DEBIAN_GUIDE,
    ),
    (
        ("debian-12", "590", "590.48.01", "proprietary", "cuda-repo"),
        DEBIAN_CUDA_REPO + ["nvidia-kernel-dkms"],
        "590.48.01-1",
        DEBIAN_HEADERS,
        DEBIAN_GUIDE,
    ),
    (
        ("debian-12", "535", "535.261.03", "proprietary", "distro"),
        ["nvidia-smi", "libnvidia-ml1", "libcuda1", "nvidia-alternative", "libnvidia-ptxjitcompiler1"]
        + ["libnvidia-pkcs11-openssl3", "nvidia-kernel-dkms"],
        "535.261.03-*",
        DEBIAN_HEADERS,
        DEBIAN_DISTRO,
    ),
]


@pytest.mark.parametrize(
    ("case", "packages", "pin", "headers", "source"),
    DRIVER_TABLE,
    ids=["-".join(r[0][:2]) for r in DRIVER_TABLE],
)
def test_driver_packages_are_the_documented_names(
    case: tuple[str, ...], packages: list[str], pin: str, headers: list[str], source: str
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


# (os image, branch, version, source) -> the version-locking package installed where offered, and
# whether it must be there. NVIDIA's pinning packages exist for Debian and Ubuntu ("Recent Updates":
# "Driver pinning packages have been introduced for Debian and Ubuntu"; nvidia-driver-pinning-580 on
# Debian 13 and nvidia-driver-pinning-580.173.02 on Ubuntu 24.04 in public install scripts); from 590 on
# Ubuntu the names carry no branch, so only the pinning package keeps apt on the version.
PINNING_TABLE = [
    # issue 23: pinning packages exist below 580 too (nvidia-driver-pinning-570 and -570.211.01 in NVIDIA's
    # debian12 listing, "APT driver pinning file for driver version 570.211.01"): looked for on every branch.
    (("ubuntu-22.04", "570", "570.133.20", "cuda-repo"), ["nvidia-driver-pinning-570.133.20"], False),
    (("ubuntu-24.04", "580", "580.95.05", "cuda-repo"), ["nvidia-driver-pinning-580.95.05"], False),
    (("ubuntu-24.04", "590", "590.48.01", "cuda-repo"), ["nvidia-driver-pinning-590.48.01"], True),
    (("ubuntu-22.04", "595", "595.71.05", "cuda-repo"), ["nvidia-driver-pinning-595.71.05"], True),
    (("debian-12", "590", "590.48.01", "cuda-repo"), ["nvidia-driver-pinning-590.48.01"], False),
    (("debian-12", "535", "535.261.03", "distro"), [], False),
]


@pytest.mark.parametrize(
    ("case", "wanted", "required"), PINNING_TABLE, ids=["-".join(r[0][:2]) for r in PINNING_TABLE]
)
def test_driver_pinning_package_per_branch(case: tuple[str, ...], wanted: list[str], required: bool) -> None:
    os_image, branch, version, source = case
    given = {"nvidia_driver_branch": branch, "nvidia_driver_version": version, "nvidia_driver_source": source}
    got = render(
        "nvidia_driver",
        os_image,
        "{{ [_nvidia_driver_pinning_package] if _nvidia_driver_pinning_wanted | bool else [] }}",
        **given,
    )
    assert got == wanted
    assert (
        render("nvidia_driver", os_image, "{{ _nvidia_driver_pinning_required | bool }}", **given) == required
    )


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


FM_INSTALL_SH = (
    "https://github.com/NVIDIA/gpu-driver-container/blob/main/ubuntu22.04/install.sh (branch >= 580: "
    "nvidia-fabricmanager, libnvidia-nscq, else -${DRIVER_BRANCH}; '=${DRIVER_VERSION}*'; nvsdm_install: "
    "libnvsdm from 580, libnvsdm-${DRIVER_BRANCH} from 570, none below, amd64 only)"
)
FM_DEBIAN = "NVIDIA debian12 listing: nvidia-fabricmanager-575_575.57.08-1, nvidia-fabricmanager_580.65.06-1"
FM_UBUNTU_570 = (
    "public install scripts: nvidia-fabricmanager-570=570.133.20-1 libnvidia-nscq-570=570.133.20-1"
)
# (os image, version) -> pinned packages, pin, source.
FABRIC_MANAGER_TABLE = [
    (
        ("ubuntu-22.04", "550.163.01"),
        ["nvidia-fabricmanager-550", "libnvidia-nscq-550"],
        "550.163.01-1",
        FM_INSTALL_SH,
    ),
    (
        ("debian-12", "570.133.20"),
        ["nvidia-fabricmanager-570", "libnvidia-nscq-570", "libnvsdm-570"],
        "570.133.20-1",
        FM_DEBIAN,
    ),
    (
        ("debian-12", "575.57.08"),
        ["nvidia-fabricmanager-575", "libnvidia-nscq-575", "libnvsdm-575"],
        "575.57.08-1",
        FM_DEBIAN,
    ),
    (
        ("debian-12", "580.65.06"),
        ["nvidia-fabricmanager", "libnvidia-nscq", "libnvsdm"],
        "580.65.06-1",
        FM_DEBIAN,
    ),
    (
        ("ubuntu-22.04", "570.133.20"),
        ["nvidia-fabricmanager-570", "libnvidia-nscq-570", "libnvsdm-570"],
        "570.133.20-1",
        FM_UBUNTU_570 + "; " + FM_INSTALL_SH,
    ),
    (
        ("ubuntu-24.04", "580.95.05"),
        ["nvidia-fabricmanager", "libnvidia-nscq", "libnvsdm"],
        "580.95.05-*",
        FM_INSTALL_SH,
    ),
    (
        ("ubuntu-24.04", "595.71.05"),
        ["nvidia-fabricmanager", "libnvidia-nscq", "libnvsdm"],
        "595.71.05-*",
        FM_INSTALL_SH + "; 595.71.05-1ubuntu1: https://github.com/NVIDIA/gpu-driver-container/pull/899",
    ),
]


@pytest.mark.parametrize(
    ("case", "packages", "pin", "source"),
    FABRIC_MANAGER_TABLE,
    ids=["-".join(r[0]) for r in FABRIC_MANAGER_TABLE],
)
def test_fabric_manager_package_names_per_branch(
    case: tuple[str, str], packages: list[str], pin: str, source: str
) -> None:
    os_image, version = case
    got = render(
        "fabric_manager",
        os_image,
        "{{ [_fabric_manager_pinned, _fabric_manager_pin] }}",
        **{"fabric_manager_version": version},
    )
    assert got == [packages, pin]
    # The compatibility matrix says the same (one rule, two readers).
    assert load_compat().fabric_manager.package_names(int(version.split(".")[0])) == packages


@pytest.mark.parametrize("version", ["570.133.20", "590.48.01"])
def test_arm64_hosts_leave_libnvsdm_out(version: str) -> None:
    # NVIDIA publishes no libnvsdm for arm64 (gpu-driver-container install.sh): fabric_manager_nvsdm false.
    given = {"fabric_manager_version": version, "fabric_manager_nvsdm": False}
    got = render("fabric_manager", "ubuntu-24.04", "{{ _fabric_manager_pinned }}", **given)
    assert not [p for p in got if p.startswith("libnvsdm")], got
    assert got == load_compat().fabric_manager.package_names(int(version.split(".")[0]), nvsdm=False)


@pytest.mark.parametrize(("nvlink5", "extra"), [(True, ["nvlsm", "infiniband-diags"]), (False, [])])
def test_nvlink5_nodes_get_the_subnet_manager_and_tools(nvlink5: bool, extra: list[str]) -> None:
    given = {"fabric_manager_version": "580.95.05", "fabric_manager_nvlink5": nvlink5}
    assert (
        render("fabric_manager", "ubuntu-24.04", "{{ _fabric_manager_nvlink5_packages }}", **given) == extra
    )
    rule = load_compat().fabric_manager.nvlink5
    assert (
        render("fabric_manager", None, "{{ _fabric_manager_nvlink5_modules }}", **given)
        == rule.kernel_modules
    )
    assert rule.packages == ["nvlsm", "infiniband-diags"]
    pinned = render(
        "fabric_manager",
        None,
        "{{ _fabric_manager_nvlink5_install }}",
        fabric_manager_nvlsm_version="2025.10.14-1",
    )
    assert pinned == ["nvlsm=2025.10.14-1", "infiniband-diags"]


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


DCGM_INSTALL = (
    "https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/getting-started.html ('sudo apt-get install "
    "--yes --install-recommends datacenter-gpu-manager-4-cuda${CUDA_VERSION}', CUDA_VERSION read from "
    "nvidia-smi's 'CUDA Version', i.e. the driver's; the stored copy of the page stops before that section, the "
    "command is as public install scripts copy it). Recommends: libnuma1 "
    "(https://github.com/NVIDIA/DCGM/blob/master/cmake/packaging.cmake, CPACK_DEBIAN_CUDA12_PACKAGE_RECOMMENDS) "
    "and, in NVIDIA's binary repository, datacenter-gpu-manager-4-proprietary-cuda<N> (apt-cache depends "
    "datacenter-gpu-manager-4-cuda13, DCGM 4.6.1)"
)
DCGM_PROPRIETARY = (
    "https://github.com/NVIDIA/dcgm-exporter/blob/main/README.md#profiling-metrics ('for Ampere and earlier "
    "generation GPUs, profiling metrics depend on the datacenter-gpu-manager-4-proprietary package')"
)
# (driver, toolkit CUDA, GPU architecture) -> the DCGM packages pinned and held on that node.
DCGM_TABLE = [
    (
        # p5 (H100) with prod's 570: CUDA 12, Hopper profiles in the open part
        ("570.133.20", "12.8.1", "sm_90"),
        ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda12"],
        DCGM_INSTALL,
    ),
    (
        # p6-b200 on 580: the driver's CUDA 13, not the toolkit's 12
        ("580.95.05", "12.8.1", "sm_100"),
        ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda13"],
        DCGM_INSTALL,
    ),
    (
        # p4d (A100): Ampere needs the proprietary pair
        ("570.133.20", "12.8.1", "sm_80"),
        [
            "datacenter-gpu-manager-4-core",
            "datacenter-gpu-manager-4-cuda12",
            "datacenter-gpu-manager-4-proprietary",
            "datacenter-gpu-manager-4-proprietary-cuda12",
        ],
        DCGM_INSTALL + "; " + DCGM_PROPRIETARY,
    ),
    (
        # g5 (A10G) on 580: Ampere, CUDA 13 suffix on both
        ("580.95.05", "12.8.1", "sm_86"),
        [
            "datacenter-gpu-manager-4-core",
            "datacenter-gpu-manager-4-cuda13",
            "datacenter-gpu-manager-4-proprietary",
            "datacenter-gpu-manager-4-proprietary-cuda13",
        ],
        DCGM_INSTALL + "; " + DCGM_PROPRIETARY,
    ),
    (
        # no GPU (container node): nothing to profile
        ("535.261.03", "11.8.89", None),
        ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager-4-cuda12"],
        DCGM_INSTALL,
    ),
]


@pytest.mark.parametrize(
    ("case", "packages", "source"), DCGM_TABLE, ids=["-".join(str(c) for c in r[0]) for r in DCGM_TABLE]
)
def test_dcgm_packages_per_driver_cuda_major_and_architecture(
    case: tuple[str, str, str | None], packages: list[str], source: str
) -> None:
    from clusterforge.inventory import dcgm_cuda_major, dcgm_proprietary

    driver, cuda, architecture = case
    given = {
        "dcgm_version": "4.2.3",
        "dcgm_cuda_major": dcgm_cuda_major(driver, cuda),
        "dcgm_proprietary": dcgm_proprietary(architecture),
    }
    assert render("dcgm", "ubuntu-22.04", "{{ _dcgm_packages }}", **given) == packages
    assert render("dcgm", "ubuntu-22.04", "{{ _dcgm_pin }}", **given) == "1:4.2.3-1"


def test_dcgm_installs_the_recommends_nvidia_installs() -> None:
    # NVIDIA's command installs Recommends (libnuma1; -proprietary-cuda<N> from NVIDIA's repository).
    assert render("dcgm", None, "{{ dcgm_install_recommends }}") is True
    task = yaml.safe_load((ROLES / "dcgm/tasks/setup-Debian.yml").read_text())[0]
    assert task["ansible.builtin.apt"]["install_recommends"] == "{{ dcgm_install_recommends }}"


@pytest.mark.parametrize(
    ("instance_type", "proprietary"),
    [("p4d.24xlarge", True), ("g5.xlarge", True), ("p5.48xlarge", False), ("p6-b200.48xlarge", False)],
)
def test_inventory_asks_for_the_proprietary_pair_by_architecture(
    instance_type: str, proprietary: bool
) -> None:
    from clusterforge.inventory import host_vars
    from clusterforge.providers.base import Node

    hv = host_vars(Node("gpu-001", "10.0.0.5", "gpu", "gpu", instance_type, {"ansible_connection": "ssh"}))
    assert hv["dcgm_proprietary"] is proprietary


def _systemd_sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = line.strip("[]")
            sections.setdefault(current, [])
        else:
            sections[current].append(line)
    return sections


def test_dcgm_exporter_drop_in_uses_the_running_host_engine() -> None:
    """The drop-in the monitoring role writes: remote host engine localhost:5555 (dcgm-exporter's -r,
    as DCGM_REMOTE_HOSTENGINE_INFO; https://github.com/NVIDIA/dcgm-exporter/blob/main/README.md "Remote
    Hostengine (Environment Variable)"), ordered after and bound to nvidia-dcgm.service; the packaged
    ExecStart (https://github.com/NVIDIA/dcgm-exporter/blob/main/packaging/config-files/systemd/
    nvidia-dcgm-exporter.service: `dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv`) is kept."""
    template = (ROLES / "monitoring/templates/dcgm-exporter-hostengine.conf.j2").read_text()
    text = render("monitoring", None, template, ansible_managed="managed by clusterforge")
    sections = _systemd_sections(text)
    assert sections["Unit"] == ["Requires=nvidia-dcgm.service", "After=nvidia-dcgm.service"]
    assert "Environment=DCGM_REMOTE_HOSTENGINE_INFO=localhost:5555" in sections["Service"]
    assert "Restart=on-failure" in sections["Service"]
    assert not [line for line in sections["Service"] if line.startswith("ExecStart")]
    path = render("monitoring", None, "{{ _monitoring_dcgm_exporter_dropin }}")
    assert path == "/etc/systemd/system/nvidia-dcgm-exporter.service.d/10-clusterforge-hostengine.conf"
    # The role writes it before starting the exporter, and restarts the exporter when it changes.
    tasks = yaml.safe_load((ROLES / "monitoring/tasks/dcgm_exporter.yml").read_text())
    names = [t["name"] for t in tasks]
    assert names.index("Point dcgm-exporter at the running host engine") < names.index(
        "Enable and start dcgm-exporter"
    )
    dropin = tasks[names.index("Point dcgm-exporter at the running host engine")]
    assert dropin["notify"] == "Restart dcgm-exporter"
    handlers = yaml.safe_load((ROLES / "monitoring/handlers/main.yml").read_text())
    assert "Restart dcgm-exporter" in [h["name"] for h in handlers]


# issue 23: what the driver pins beyond its own four packages, and what the apt preferences file locks.
# nvidia-dkms-<branch>[-open] Depends nvidia-kernel-source-<branch>[-open] and nvidia-kernel-common-<branch>
# bounded on both sides to its own version; nvidia-kernel-common Depends the firmware package of its
# version (canonical/nvidia-graphics-drivers debian/control, release 570.133.20; the stand-in
# tests/data/nvidia_repo/ubuntu2204.yaml carries the same relations).
CLOSURE_TABLE = [
    (("ubuntu-22.04", "570", "570.133.20", "open", True), ["nvidia-kernel-common-570", "nvidia-kernel-source-570-open"], "nvidia-firmware-570*"),
    (("ubuntu-22.04", "580", "580.105.08", "proprietary", True), ["nvidia-kernel-common-580", "nvidia-kernel-source-580"], "nvidia-firmware-580*"),
    (("ubuntu-24.04", "580", "580.105.08", "open", True), ["nvidia-kernel-common-580", "nvidia-kernel-source-580-open"], "nvidia-firmware-580*"),
    # a container node installs no kernel module: nothing to lock beyond the userland
    (("ubuntu-22.04", "580", "580.105.08", "open", False), [], None),
    (("debian-12", "570", "570.133.20", "open", True), [], None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "closure", "firmware"), CLOSURE_TABLE, ids=["-".join(map(str, r[0])) for r in CLOSURE_TABLE]
)
def test_the_kernel_packages_exact_dependencies_are_locked_with_them(
    case: tuple, closure: list[str], firmware: str | None
) -> None:
    os_image, branch, version, module, kmod = case
    given = {
        "nvidia_driver_branch": branch,
        "nvidia_driver_version": version,
        "nvidia_driver_kernel_module": module,
        "nvidia_driver_source": "cuda-repo",
        "nvidia_driver_kernel_module_install": kmod,
    }
    pinned = render("nvidia_driver", os_image, "{{ _nvidia_driver_pinned }}", **given)
    assert render("nvidia_driver", os_image, "{{ _nvidia_driver_locked }}", **given) == pinned + closure
    locked = render("nvidia_driver", os_image, "{{ _nvidia_driver_preferences_packages }}", **given)
    assert locked == pinned + closure + ([firmware] if firmware else [])
    text = render(
        "nvidia_driver",
        os_image,
        (ROLES / "nvidia_driver" / "templates" / "apt-preferences.j2").read_text(),
        ansible_managed="managed",
        **given,
    )
    pin = render("nvidia_driver", os_image, "{{ _nvidia_driver_pin }}", **given)
    assert f"Package: {' '.join(locked)}\nPin: version {pin}\nPin-Priority: 1001" in text


# issue 23: DKMS builds the NVIDIA and EFA modules with the gcc that built the running kernel; the
# kernel_compiler role reads it from /proc/version (captures and their sources: tests/data/proc-version).
PROC_VERSION = Path(__file__).resolve().parents[1] / "data" / "proc-version"


@pytest.mark.parametrize(
    ("capture", "major"),
    [
        ("jammy-6.8.0-1063-aws.txt", "12"),
        ("jammy-6.8.0-1015-aws.txt", "11"),
        ("noble-6.8.0-1029-aws.txt", "13"),
        ("focal-5.15.0-1084-aws.txt", "9"),
        ("bionic-4.15.0-1051-aws.txt", "7"),
    ],
)
def test_the_kernels_compiler_is_read_from_proc_version(capture: str, major: str) -> None:
    text = (PROC_VERSION / capture).read_text()
    content = base64.b64encode(text.encode()).decode()
    given = {"__kernel_compiler_proc_version": {"content": content}}
    assert render("kernel_compiler", None, "{{ _kernel_compiler_major }}", **given) == major
    assert render("kernel_compiler", None, "{{ _kernel_compiler_package }}", **given) == f"gcc-{major}"


def test_an_unreadable_banner_names_no_compiler() -> None:
    given = {
        "__kernel_compiler_proc_version": {"content": base64.b64encode(b"Linux version 6.9.0\n").decode()}
    }
    assert render("kernel_compiler", None, "{{ _kernel_compiler_major }}", **given) == ""


@pytest.mark.parametrize(
    ("dcgm", "major", "ok"),
    [
        ("4.2.3", "12", True),
        ("4.2.3", "13", False),
        ("4.3.1", "13", False),
        ("4.4.1", "13", True),
        ("4.6.0", "13", True),
    ],
)
def test_the_dcgm_role_refuses_a_release_without_the_drivers_cuda_package(
    dcgm: str, major: str, ok: bool
) -> None:
    """issue 23: a 580 driver reports CUDA 13; DCGM ships -cuda13 from 4.4.1 (NVIDIA/DCGM packaging.cmake)."""
    expr = (
        "{{ (dcgm_cuda_major | string) not in _dcgm_cuda_first_release or "
        "dcgm_version is version(_dcgm_cuda_first_release[dcgm_cuda_major | string], '>=') }}"
    )
    assert render("dcgm", None, expr, dcgm_version=dcgm, dcgm_cuda_major=major) is ok


@pytest.mark.parametrize(
    ("branch", "version", "held", "released"),
    [
        # prod's move: the 570 set is held, the 580 one conflicts with it
        ("580", "580.105.08", ["libnvidia-compute-570", "nvidia-dkms-570-open", "nvidia-kernel-common-570", "libnccl2"],
         ["libnvidia-compute-570", "nvidia-dkms-570-open", "nvidia-kernel-common-570"]),
        # 580 -> 590: NVIDIA drops the branch from the names
        ("590", "590.48.01", ["libnvidia-compute-580", "nvidia-dkms-580-open", "nvidia-utils-580"],
         ["libnvidia-compute-580", "nvidia-dkms-580-open", "nvidia-utils-580"]),
        # the same branch again: nothing released
        ("580", "580.105.08", ["libnvidia-compute-580", "nvidia-dkms-580-open"], []),
    ],
)  # fmt: skip
def test_a_branch_move_releases_the_old_branchs_held_packages(
    branch: str, version: str, held: list[str], released: list[str]
) -> None:
    given = {
        "nvidia_driver_branch": branch,
        "nvidia_driver_version": version,
        "nvidia_driver_kernel_module": "open",
        "nvidia_driver_source": "cuda-repo",
        "__nvidia_driver_held_before": {"stdout_lines": held},
    }
    assert render("nvidia_driver", "ubuntu-22.04", "{{ _nvidia_driver_other_branch }}", **given) == released
