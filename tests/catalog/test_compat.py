"""The compatibility matrix: sourced, internally consistent, and agreeing with the hardware."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from clusterforge.catalog import load_compat, load_hardware
from clusterforge.catalog.compat import COMPAT_FILE, read_compat
from clusterforge.catalog.versions import at_least, major_minor, vcmp, vtuple
from clusterforge.strict_yaml import DuplicateKeyError

C = load_compat()
HW = load_hardware()


def test_every_rule_cites_a_declared_source() -> None:
    refs = C.source_refs()
    assert refs and all(ref in C.sources for ref in refs)
    assert set(C.sources) == set(refs), "every declared source is used"
    assert all(text.strip() for text in C.sources.values())


# Rules no public source states outright. Adding one here is a decision: its note must say what it
# was derived from. A rule that gains a source leaves this list (and loses `estimate: true`).
ESTIMATES = {
    "gpu_models.H100": "CUDA 12.0 GA driver",
    "gpu_models.H200": "CUDA 12.4 GA driver",
    "instance_floors.p5e.48xlarge,p5en.48xlarge": "p5.48xlarge only",
    "os_images": "Debian 12 is inferred",
    "torch.builds.2.11.0+cu126": "taken to carry the same list as 2.12's",
    "torch.builds.2.11.0+cu128": "the CUDA 12.8 builds' of earlier releases",
    "gpu_models.B300": "first toolkit with sm_103",
}


def test_every_rule_is_sourced_or_an_explained_estimate() -> None:
    every = C.provenance()
    assert len(every) > 40 and all(p.source for p in every)
    estimates = {p.where: p.note for p in C.estimates()}
    assert set(estimates) == set(ESTIMATES)
    for where, reason in ESTIMATES.items():
        assert reason in estimates[where], where


def test_an_estimate_without_a_note_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(COMPAT_FILE.read_text())
    data["gpu_models"]["H200"]["note"] = " "
    path = tmp_path / "compat.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationError, match="an estimate needs a note"):
        read_compat(path)


def test_cuda_table_covers_11_8_to_13_and_never_lowers_the_driver() -> None:
    rows = sorted(C.cuda_releases, key=lambda r: vtuple(r.cuda))
    assert {"11.8", "12.0", "12.4", "12.8", "12.9", "13.0"} <= {major_minor(r.cuda) for r in rows}
    for earlier, later in zip(rows, rows[1:], strict=False):
        assert at_least(later.min_driver, earlier.min_driver), f"{later.cuda} needs less than {earlier.cuda}"
    for row in rows:
        floor = C.cuda_major_floor(row.cuda)
        assert floor is not None and at_least(row.min_driver, floor.min_driver)


@pytest.mark.parametrize(
    ("cuda", "driver"),
    # Spot checks against NVIDIA's table (cuda-release-notes), Update releases included.
    [
        ("12.8.1", "570.124.06"),
        ("12.8.0", "570.26"),
        ("11.8.89", "520.61.05"),
        ("12.6.3", "560.35.05"),
        ("12.2.2", "535.104.05"),
        ("12.9.1", "575.57.08"),
        ("13.0.2", "580.95.05"),
        ("13.1.0", "590.44.01"),
    ],
)
def test_cuda_release_lookup(cuda: str, driver: str) -> None:
    row = C.cuda_release(cuda)
    assert row is not None and row.min_driver == driver


def test_unknown_cuda_release() -> None:
    assert C.cuda_release("12.7.0") is None
    assert C.cuda_release("10.2.89") is None


def test_every_gpu_in_the_hardware_has_a_rule_with_the_same_architecture() -> None:
    for it in HW.instance_types.values():
        if it.gpu is None:
            continue
        rule = C.gpu(it.gpu.model)
        assert rule is not None, it.gpu.model
        assert rule.architecture == it.gpu.architecture
        row = C.cuda_release(rule.min_cuda)
        if row is not None:  # a GPU's minimum driver covers its minimum toolkit
            assert at_least(rule.min_driver, row.min_driver)


def test_blackwell_rules() -> None:
    b200 = C.gpu("B200")
    assert b200 is not None
    assert b200.kernel_modules == ["open"]
    assert (b200.min_cuda, b200.min_driver) == ("12.8", "570.133.20")
    assert set(C.gpu("H100").kernel_modules) == {"open", "proprietary"}  # type: ignore[union-attr]


def test_fabric_manager_and_efa_rules() -> None:
    assert C.fabric_manager.must_equal_driver and C.fabric_manager.required_on_nvswitch
    (rule,) = [r for r in C.efa_env if r.id == "efa-cuda-sync-memops"]
    assert (rule.nccl_min, rule.efa_installer_below, rule.env) == (
        "2.19.0",
        "1.29.1",
        {"FI_EFA_SET_CUDA_SYNC_MEMOPS": "0"},
    )
    floors = {f.component: (f.required, f.recommended) for f, _ in C.floors_for("p5.48xlarge")}
    assert floors == {
        "cuda": ("12.0", None),
        "nccl": ("2.18.0", "2.18.5"),
        "aws_ofi_nccl": ("1.7.2", "1.7.3"),
    }
    assert C.floors_for("g5.xlarge") == []
    assert [(f.component, f.required) for f, _ in C.floors_for("p6-b200.48xlarge")] == [
        ("aws_ofi_nccl", "1.15.0")
    ]


def test_nccl_ranges_do_not_overlap() -> None:
    rules = sorted(C.nccl_cuda, key=lambda r: vtuple(r.nccl_min))
    for a, b in zip(rules, rules[1:], strict=False):
        assert a.nccl_below is not None and vcmp(a.nccl_below, b.nccl_min) <= 0
    assert C.nccl_cuda_majors("2.15.5") == ["11"]
    assert C.nccl_cuda_majors("2.16.2") == ["11", "12"]  # first +cuda12.0 redist build
    assert C.nccl_cuda_majors("2.21.5") == ["11", "12"]  # last +cuda11 build
    assert C.nccl_cuda_majors("2.22.3") == ["12"]
    assert C.nccl_cuda_majors("2.27.6") == ["12"]
    assert C.nccl_cuda_majors("2.27.7") == ["12", "13"]  # first +cuda13.0 redist build
    assert C.nccl_cuda_majors("2.7.8") is None


def test_aws_ofi_nccl_nccl_floor() -> None:
    rules = sorted(C.aws_ofi_nccl, key=lambda r: vtuple(r.aws_ofi_nccl_min))
    for a, b in zip(rules, rules[1:], strict=False):
        assert a.aws_ofi_nccl_below is not None and vcmp(a.aws_ofi_nccl_below, b.aws_ofi_nccl_min) <= 0
    assert C.aws_ofi_nccl_rule("1.7.3").nccl_min == "2.4.8"  # type: ignore[union-attr]
    assert C.aws_ofi_nccl_rule("1.14.0").nccl_min == "2.17.1"  # type: ignore[union-attr]
    assert C.aws_ofi_nccl_rule("1.11.0") is None, "no release notes found for 1.10/1.11: no claim"


def test_slurm_families_and_os_images() -> None:
    assert {"22.05", "23.02", "23.11", "24.05", "24.11", "25.05"} <= set(C.slurm_families)
    fam = C.slurm_family("25.11.1")
    assert fam is not None and fam.upstream_supported
    old = C.slurm_family("24.05.7")
    assert old is not None and not old.upstream_supported, "24.05 + 18 months ended 2025-11"
    assert C.slurm_family("24.03.1") is None
    assert C.os_images.providers["local"] == ["debian-12"]


def test_fsx_capacity_steps() -> None:
    p2 = C.fsx_lustre.deployment_types["PERSISTENT_2"]
    assert [p2.capacity_ok(g) for g in (1200, 2400, 4800, 48000, 3000, 1000)] == [True] * 4 + [False] * 2


def test_an_unquoted_two_part_version_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(COMPAT_FILE.read_text())
    data["gpu_models"]["A100"]["min_cuda"] = 12.10  # YAML would have read "12.10" as 12.1
    path = tmp_path / "compat.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationError, match="write the version 12.1 as a quoted string"):
        read_compat(path)


def test_version_helpers() -> None:
    assert vcmp("570.133.20", "570.86.15") == 1
    assert vcmp("12.8", "12.8.0") == 0
    assert at_least("2.18.5", "2.18.5") and not at_least("2.18.3", "2.18.5")
    assert major_minor("24.05.7") == "24.05"
    with pytest.raises(ValueError, match="not a dotted version"):
        vtuple("2.26.2-1+cuda12.8")


def test_driver_lifecycle() -> None:
    life = C.driver_lifecycle
    assert life.ended("570") == "2026-02" and life.ended("580") is None
    assert life.ended("550") == f"before {life.as_of}", "branches NVIDIA no longer lists are end of life"


def test_slurm_support_flags_follow_the_policy() -> None:
    policy = C.slurm_support
    assert policy.support_months == 18
    for name, fam in C.slurm_families.items():
        assert fam.released[2:4] + "." + fam.released[5:7] == name, "families are named YY.MM"
        assert fam.upstream_supported is policy.supported(fam.released), name
    assert policy.supported("2025-06") and not policy.supported("2025-05")  # as_of 2026-11


def test_a_key_given_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    # A second top-level block must not silently replace the first (PyYAML keeps the last).
    text = COMPAT_FILE.read_text()
    top = next(line for line in text.splitlines() if line and line[0].isalpha())
    path = tmp_path / "compat.yaml"
    path.write_text(text + top + "\n")
    key = top.split(":")[0]
    with pytest.raises(DuplicateKeyError) as err:
        read_compat(path)
    last = len(path.read_text().splitlines())
    assert str(err.value).startswith(f"{path}:{last}: {key}: duplicate key {key!r} (first at line ")
    assert "remove one of them" in str(err.value)
