"""spec.check against NVIDIA's security floors and the health section's cross-references."""

from __future__ import annotations

from pathlib import Path

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
    spec.write_text(text.replace("fabric_manager: 580.105.08", "fabric_manager: 580.159.03"))
    assert by_check(spec, "security-floor") == []


def test_the_policy_makes_it_an_error(tmp_path: Path) -> None:
    report = check_file(variant(tmp_path, "prod", append="health: {floors: error}\n"))
    assert not report.ok
    assert {f.path for f in report.errors if f.check_id == "security-floor"} == {
        "software.driver.version",
        "software.nvidia_container_toolkit",
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
    assert len(notes) == 2
    assert all("pool gpu (16 node(s) gpu-001..gpu-016)" in n for n in notes)
    assert "runs driver 580.105.08, below 580.159.03 (NVIDIA bulletin 5821, 2026-05-21" in notes[0]
    assert not any("pool head" in n for n in notes)
