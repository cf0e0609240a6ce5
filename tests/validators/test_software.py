"""software-versions and python-runtime."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest
from conftest import (
    NVSMI_NO_DRIVER_RC,
    FakeRunner,
    captured,
    gpu_config,
    make_context,
    nvsmi_no_driver_text,
    tiny_cpu_config,
)

from validators.checks.software import (
    SLURMD_VERSION,
    PythonRuntime,
    SoftwareVersions,
    parse_slurmd_version,
    upstream_version,
    version_matches,
)
from validators.parsers.dpkg import DPKG_PIN_FORMAT
from validators.suite import run_check

DPKG = ("dpkg-query", "-W")
NVSMI_DRIVER = ("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")


class DpkgRunner(FakeRunner):
    """Answers dpkg-query -W like dpkg: the installed packages matching the globs, rc 1 when none."""

    def __init__(self, installed: dict) -> None:
        super().__init__({})
        self.installed = installed

    def __call__(self, argv, timeout):  # type: ignore[no-untyped-def]
        if tuple(argv[:2]) != DPKG:
            return super().__call__(argv, timeout)
        self.calls.append(list(argv))
        rows = [
            # a value is a version ("ii": installed) or (version, dpkg's Status-Abbrev)
            "{}\t{}\t{}\n".format(p, *(v if isinstance(v, tuple) else (v, "ii ")))
            for p, v in self.installed.items()
            if any(fnmatch.fnmatch(p, g) for g in argv[4:])
        ]
        return (0 if rows else 1), "".join(rows), ""


def dpkg_answer(installed: dict) -> DpkgRunner:
    return DpkgRunner(installed)


def test_version_normalisation() -> None:
    assert upstream_version("1:4.2.3-1") == "4.2.3"
    assert upstream_version("11.8.89~11.8.0-5~deb12u1") == "11.8.89"
    assert upstream_version("2.26.2-1+cuda12.8") == "2.26.2"
    assert version_matches("12.8", "12.8.1-1") and not version_matches("12.8", "12.80.1")
    assert not version_matches("2.26.2", "2.26.20-1")


def test_cpu_node_checks_installed_pins_and_tolerates_absent_gpu_packages(tmp_path) -> None:
    runner = dpkg_answer({"slurmd": "22.05.8-4+deb12u3", "slurm-wlm": "22.05.8-4+deb12u3"})
    result = run_check(SoftwareVersions(), make_context(tiny_cpu_config(tmp_path), runner))
    assert result.status == "pass", result.summary
    assert any(line.startswith("nccl: not installed") for line in result.evidence["lines"])
    assert any(line.startswith("slurm: 22.05.8 ok") for line in result.evidence["lines"])


def test_mismatch_names_component_expected_and_found(tmp_path) -> None:
    runner = dpkg_answer({"libnccl2": "2.21.5-1+cuda12.4", "slurmd": "22.05.8-4+deb12u3"})
    result = run_check(SoftwareVersions(), make_context(tiny_cpu_config(tmp_path), runner))
    assert result.status == "fail"
    assert result.summary == "nccl: expected 2.26.2, found libnccl2 2.21.5-1+cuda12.4 (packages libnccl2)"


def test_drift_in_one_of_several_packages_fails_but_cuda_toolkits_may_coexist() -> None:
    runner = dpkg_answer({"slurmd": "22.05.7-1", "slurm-wlm": "22.05.8-4+deb12u3"})
    cfg = {"schema_version": 1, "node": "n", "instance_type": "local", "software": {"slurm": "22.05.8"}}
    result = run_check(SoftwareVersions(), make_context(cfg, runner))
    assert result.status == "fail"
    assert result.summary.startswith("slurm: expected 22.05.8, found slurmd 22.05.7-1")
    runner = dpkg_answer({"cuda-toolkit-12-4": "12.4.1-1", "cuda-toolkit-12-8": "12.8.1-1"})
    cfg["software"] = {"cuda": "12.8.1"}
    assert run_check(SoftwareVersions(), make_context(cfg, runner)).status == "pass"


def test_gpu_node_driver_read_by_nvidia_smi_and_missing_packages_fail() -> None:
    runner = dpkg_answer(
        {
            "libnccl2": "2.26.2-1+cuda12.8",
            "cuda-toolkit-12-8": "12.8.1-1",
            "nvidia-fabricmanager-570": "570.133.20-1",
            "datacenter-gpu-manager-4-core": "1:4.2.3-1",
            "slurmd": "24.05.7-1",
        }
    )
    runner.answers[NVSMI_DRIVER] = (0, "570.133.20\n" * 8, "")
    runner.answers[("cat", "/opt/amazon/efa_installed_packages")] = (
        0,
        "# EFA installer version: 1.40.0\n",
        "",
    )
    result = run_check(SoftwareVersions(), make_context(gpu_config(), runner))
    assert result.status == "pass", result.summary
    assert result.metrics["components_checked"]["value"] == 7
    runner.answers[NVSMI_DRIVER] = (NVSMI_NO_DRIVER_RC, nvsmi_no_driver_text(), "")
    del runner.answers[("cat", "/opt/amazon/efa_installed_packages")]
    result = run_check(SoftwareVersions(), make_context(gpu_config(), runner))
    assert result.status == "fail"
    assert (
        "driver: cannot read the version: nvidia-smi failed (rc 9): NVIDIA-SMI has failed" in result.summary
    )
    assert "efa_installer: expected 1.40.0, not installed" in result.summary


def test_python_runtime_reads_torch_without_importing_it(tmp_path) -> None:
    cfg = tiny_cpu_config(tmp_path)
    result = run_check(PythonRuntime(), make_context(cfg, FakeRunner({})))
    assert result.status == "pass", result.summary
    cfg["software"]["torch"] = "1.0.0"
    result = run_check(PythonRuntime(), make_context(cfg, FakeRunner({})))
    assert result.status == "fail" and result.summary.startswith("torch: expected 1.0.0, found 2.13.0")


def test_held_packages_count_as_installed_and_removed_ones_do_not() -> None:
    """The roles hold every pinned package: dpkg shows those as "hi ", and they must be checked."""
    cfg = {"schema_version": 1, "node": "n", "instance_type": "local", "software": {"slurm": "22.05.8"}}
    held = dpkg_answer({"slurmd": ("22.05.7-1", "hi ")})
    result = run_check(SoftwareVersions(), make_context(cfg, held))
    assert result.status == "fail"
    assert result.summary.startswith("slurm: expected 22.05.8, found slurmd 22.05.7-1")
    removed = dpkg_answer({"slurmd": ("22.05.7-1", "rc "), "slurm-wlm": ("22.05.8-4+deb12u3", "hi ")})
    result = run_check(SoftwareVersions(), make_context(cfg, removed))
    assert result.status == "pass", result.summary


SLURMD_V = (Path(__file__).resolve().parents[1] / "data" / "slurm" / "slurmd-V-source.txt").read_text()


def test_slurm_built_from_source_is_read_from_slurmd() -> None:
    """No Slurm package (roles/slurm slurm_install_method: source): slurmd -V says the version."""
    assert parse_slurmd_version(SLURMD_V) == "22.05.8"
    assert parse_slurmd_version("slurmd: error: something\n") is None
    cfg = {"schema_version": 1, "node": "n", "instance_type": "local", "software": {"slurm": "22.05.8"}}
    runner = dpkg_answer({})
    runner.answers[SLURMD_VERSION] = (0, SLURMD_V, "")
    result = run_check(SoftwareVersions(), make_context(cfg, runner))
    assert result.status == "pass", result.summary
    assert any(
        "slurm: 22.05.8 ok (no Slurm package; /usr/local/sbin/slurmd -V" in e
        for e in result.evidence["lines"]
    )
    runner = dpkg_answer({})
    runner.answers[SLURMD_VERSION] = (0, SLURMD_V.replace("22.05.8", "22.05.9"), "")
    result = run_check(SoftwareVersions(), make_context(cfg, runner))
    assert result.status == "fail" and result.summary.startswith(
        "slurm: expected 22.05.8, found slurmd 22.05.9"
    )


class PinRunner(FakeRunner):
    """dpkg-query in the pins' format: {package: (selection, state, version)}; unknown packages
    go to stderr with rc 1, as in tests/data/dpkg-query/missing.*."""

    def __init__(self, packages: dict) -> None:
        super().__init__({})
        self.packages = packages

    def __call__(self, argv, timeout):  # type: ignore[no-untyped-def]
        if tuple(argv[:2]) != DPKG or argv[3] != DPKG_PIN_FORMAT:
            return super().__call__(argv, timeout)
        self.calls.append(list(argv))
        known = [p for p in argv[4:] if p in self.packages]
        rows = "".join("{}\t{} ok {}\t{}\n".format(p, *self.packages[p]) for p in sorted(known))
        missing = "".join(f"dpkg-query: no packages found matching {p}\n" for p in argv[4:] if p not in known)
        return (1 if missing else 0), rows, missing


PINS = [
    {"package": "nvidia-smi", "version": "535.261.03-*", "held": True},
    {"package": "nvidia-persistenced", "version": "", "held": True},
    {"package": "slurmd", "version": "22.05.8-*", "held": True},
]
HEALTHY = {
    "nvidia-smi": ("hold", "installed", "535.261.03-1~deb12u1"),
    "nvidia-persistenced": ("hold", "installed", "535.171.04-1"),
    "slurmd": ("hold", "installed", "22.05.8-4+deb12u3"),
}


def pins_config() -> dict:
    return {"schema_version": 1, "node": "n", "instance_type": "local", "pins": PINS}


def test_pins_pass_when_installed_at_the_pin_and_held() -> None:
    result = run_check(SoftwareVersions(), make_context(pins_config(), PinRunner(dict(HEALTHY))))
    assert result.status == "pass", result.summary
    assert result.summary.endswith("3 pinned package(s) installed and held")
    assert result.metrics["packages_pin_failures"]["value"] == 0


def test_pins_name_every_missing_moved_or_unheld_package() -> None:
    packages = dict(HEALTHY)
    del packages["nvidia-smi"]  # dpkg --remove --force-depends nvidia-smi (then purged)
    packages["slurmd"] = ("install", "installed", "22.05.8-4+deb12u3")  # apt-mark unhold slurmd
    packages["nvidia-persistenced"] = ("hold", "installed", "535.171.04-1")
    result = run_check(SoftwareVersions(), make_context(pins_config(), PinRunner(packages)))
    assert result.status == "fail"
    assert result.summary == "nvidia-smi: not installed (535.261.03-* pinned); slurmd: not held"
    packages["slurmd"] = ("hold", "installed", "23.02.7-1")
    result = run_check(SoftwareVersions(), make_context(pins_config(), PinRunner(packages)))
    assert "slurmd: 23.02.7-1 installed (22.05.8-* pinned)" in result.summary


def test_pins_alone_make_the_check_apply_and_an_unreadable_dpkg_fails() -> None:
    runner = FakeRunner({DPKG: (2, "", "dpkg-query: error: cannot access archive")})
    result = run_check(SoftwareVersions(), make_context(pins_config(), runner))
    assert result.status == "fail" and "cannot read their state" in result.summary


def fake_torch(root: Path, version: str, cuda: str | None) -> Path:
    """A torch install as pip leaves it: the package's version.py and its dist-info (no code)."""
    pkg = root / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('a stand-in: never imported')\n")
    value = repr(cuda) if cuda else "None"
    (pkg / "version.py").write_text(
        f"from typing import Optional\n__version__ = '{version}'\ncuda: Optional[str] = {value}\n"
    )
    info = root / f"torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    return root


@pytest.fixture
def torch_on_path(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    import importlib
    import sys

    def install(version: str, cuda: str | None) -> None:
        monkeypatch.syspath_prepend(str(fake_torch(tmp_path / "site", version, cuda)))
        monkeypatch.delitem(sys.modules, "torch", raising=False)
        importlib.invalidate_caches()

    return install


NVSMI = ("nvidia-smi", "-q", "-x")
H200_550 = (0, captured("nvidia-smi", "q_550_h200_healthy.txt"), "")  # driver 550.90.12, CUDA 12.4


def test_a_cuda_13_torch_on_a_cuda_12_driver_fails_naming_both(torch_on_path) -> None:  # type: ignore[no-untyped-def]
    """PyPI's torch 2.13.0 is a CUDA 13.0 build (Requires-Dist cuda-toolkit==13.0.3). Before, python-runtime
    passed on it (it never looked past the version) and every torch check then failed without a reason."""
    torch_on_path("2.13.0", "13.0")
    cfg = gpu_config()
    cfg["software"] = {"torch": "2.13.0"}
    result = run_check(PythonRuntime(), make_context(cfg, FakeRunner({NVSMI: H200_550})))
    assert result.status == "fail"
    assert result.summary.startswith(
        "torch 2.13.0 is built for CUDA 13.0; driver 550.90.12 supports CUDA 12.4: torch cannot use the GPUs"
    )


def test_the_build_the_catalogue_names_passes_and_another_build_of_the_version_fails(torch_on_path) -> None:  # type: ignore[no-untyped-def]
    torch_on_path("2.13.0+cu126", "12.6")
    cfg = gpu_config()
    cfg["software"] = {"torch": "2.13.0+cu126"}
    ok = run_check(PythonRuntime(), make_context(cfg, FakeRunner({NVSMI: H200_550})))
    assert ok.status == "pass", ok.summary
    assert "torch 2.13.0+cu126 is built for CUDA 12.6" in ok.evidence["lines"]
    cfg["software"] = {"torch": "2.13.0+cu130"}
    wrong = run_check(PythonRuntime(), make_context(cfg, FakeRunner({NVSMI: H200_550})))
    assert wrong.summary.startswith("torch: expected 2.13.0+cu130, found 2.13.0+cu126")


def test_a_cpu_torch_on_a_gpu_node_fails(torch_on_path) -> None:  # type: ignore[no-untyped-def]
    torch_on_path("2.13.0+cpu", None)
    result = run_check(PythonRuntime(), make_context(gpu_config(), FakeRunner({NVSMI: H200_550})))
    assert result.summary.startswith("torch 2.13.0+cpu is a CPU build")
