"""spec.check against NVIDIA's security floors and the health section's cross-references."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.plan.floors import floor_notes
from clusterforge.spec.checks import check_file
from clusterforge.spec.loader import load_spec

STACKS = Path(__file__).resolve().parents[2] / "stacks"


def variant(tmp_path: Path, stack: str, old: str = "", new: str = "", append: str = "") -> Path:
    text = (STACKS / f"{stack}.yaml").read_text()
    if old:
        assert text.count(old) == 1
        text = text.replace(old, new)
    path = tmp_path / f"{stack}-variant.yaml"
    path.write_text(text + append)
    return path


def by_check(path: Path, check: str) -> list:
    return [f for f in check_file(path).findings if f.check_id == check]


def test_a_driver_below_its_branch_floor_warns_naming_the_advisory(tmp_path: Path) -> None:
    found = by_check(STACKS / "prod.yaml", "security-floor")
    driver = next(f for f in found if f.path == "software.driver.version")
    assert driver.level == "warning"
    assert "driver 580.105.08 is below NVIDIA's security floor 580.159.03" in driver.message
    assert "NVIDIA bulletin 5821 (GPU Display Driver - May 2026, 2026-05-21: CVE-2025-33221" in driver.message
    assert "also below bulletins 5747 (580.126.09)" in driver.message
    assert (
        "fix: pin driver 580.159.03 or later (https://nvidia.custhelp.com/app/answers/detail/a_id/5821)"
        in (driver.message)
    )
    toolkit = next(f for f in found if f.path == "software.nvidia_container_toolkit")
    assert "1.17.5 is below NVIDIA's security floor 1.19.1" in toolkit.message
    assert (
        "NVIDIA bulletin 5850 (NVIDIA Container Toolkit - June 2026, 2026-06-30: CVE-2026-24260)"
        in toolkit.message
    )
    assert "also below bulletins 5659 (1.17.8)" in toolkit.message


def test_at_the_floor_nothing_is_said(tmp_path: Path) -> None:
    spec = variant(
        tmp_path,
        "prod",
        "nvidia_container_toolkit: 1.17.5",
        "nvidia_container_toolkit: 1.19.1",
    )
    text = spec.read_text().replace("version: 580.105.08", "version: 580.159.03")
    text = text.replace("fabric_manager: 580.105.08", "fabric_manager: 580.159.03")
    spec.write_text(text.replace("cuda: 12.8.1", "cuda: 13.1.0"))
    assert by_check(spec, "security-floor") == []


def test_the_policy_makes_it_an_error(tmp_path: Path) -> None:
    report = check_file(variant(tmp_path, "prod", append="health: {floors: error}\n"))
    assert not report.ok
    assert {f.path for f in report.errors if f.check_id == "security-floor"} == {
        "software.driver.version",
        "software.nvidia_container_toolkit",
        "software.cuda",
    }


def test_no_gpu_pool_only_informs(tmp_path: Path) -> None:
    found = by_check(STACKS / "local.yaml", "security-floor")
    assert found and {f.level for f in found} == {"info"}


def test_health_policy_names_pools_and_profiles(tmp_path: Path) -> None:
    spec = variant(
        tmp_path,
        "prod",
        append="health:\n  active: {profile: prodution}\n  pools:\n    gpus: {on_lemon: replace}\n",
    )
    found = {f.path: f for f in by_check(spec, "health-policy")}
    assert "no node pool 'gpus' (did you mean 'gpu'?)" in found["health.pools.gpus"].message
    assert "'prodution' is not a certification profile (did you mean 'production'?)" in (
        found["health.active.profile"].message
    )


def test_plan_lists_the_gpu_pool_below_a_floor_and_not_the_head() -> None:
    spec, _lines = load_spec(STACKS / "prod.yaml")
    notes = floor_notes(spec)
    assert len(notes) == 3
    assert all("pool gpu (16 node(s) gpu-001..gpu-016)" in n for n in notes)
    assert "runs driver 580.105.08, below 580.159.03 (NVIDIA bulletin 5821, 2026-05-21" in notes[0]
    assert not any("pool head" in n for n in notes)


def test_cuda_below_a_toolkit_bulletin_warns_naming_the_tools(tmp_path: Path) -> None:
    (cuda,) = [f for f in by_check(STACKS / "prod.yaml", "security-floor") if f.path == "software.cuda"]
    assert cuda.level == "warning"
    assert cuda.message.startswith("cuda 12.8.1 is below NVIDIA's security floor 13.1: NVIDIA bulletin 5755")
    assert (
        "in Nsight Systems" in cuda.message
        and "also below bulletins 5661 (13.0), 5643 (12.9)" in cuda.message
    )
    spec = variant(tmp_path, "prod", "cuda: 12.8.1", "cuda: 12.9.1")  # 5643 met, 5661 and 5755 not
    (cuda,) = [f for f in by_check(spec, "security-floor") if f.path == "software.cuda"]
    assert "also below bulletins 5661 (13.0);" in cuda.message and "5643" not in cuda.message


@pytest.mark.parametrize(
    ("nccl", "defects"),
    [
        ("2.18.1", ["nccl-2.18-tree-ll128", "nccl-2.18-collnet"]),  # the release with the known issue
        ("2.17.1", []),  # before the first affected release: never had it
        ("2.18.3", []),  # the fix
        ("2.27.3", ["nccl-2.28-symmetric-kernels"]),
        ("2.26.2", []),  # prod's: before symmetric kernels came
    ],
)
def test_an_nccl_release_with_a_known_defect_warns_only_inside_its_range(
    tmp_path: Path, nccl: str, defects: list[str]
) -> None:
    spec = variant(tmp_path, "prod", "nccl: 2.26.2", f"nccl: {nccl}")
    found = [f for f in by_check(spec, "security-floor") if f.path == "software.nccl"]
    if not defects:
        assert found == []
        return
    (finding,) = found
    assert finding.level == "warning"
    assert finding.message.startswith(f"nccl {nccl} has a known defect fixed in ")
    assert all(d in finding.message for d in defects)
    assert "data corruption" in finding.message and "https://github.com/NVIDIA/nccl/releases/tag/v2." in (
        finding.message
    )


def test_plan_names_a_known_defect_apart_from_a_security_floor(tmp_path: Path) -> None:
    spec, _lines = load_spec(variant(tmp_path, "prod", "nccl: 2.26.2", "nccl: 2.28.3"))
    (note,) = [n for n in floor_notes(spec) if "runs nccl" in n]
    assert note.startswith(
        "known defect: pool gpu (16 node(s) gpu-001..gpu-016) runs nccl 2.28.3, below 2.28.7"
    )
    assert (
        "(known defect nccl-2.28-symmetric-kernels, 2025-10-17, NCCL 2.28.7 - built-in symmetric kernels)"
        in note
    )
