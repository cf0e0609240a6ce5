"""The compatibility matrix: sourced, internally consistent, and agreeing with the hardware."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from clusterforge.catalog import load_compat, load_hardware
from clusterforge.catalog.compat import COMPAT_FILE, read_compat
from clusterforge.catalog.versions import at_least, major_minor, vcmp, vtuple

C = load_compat()
HW = load_hardware()


def test_every_rule_cites_a_declared_source() -> None:
    refs = C.source_refs()
    assert refs and all(ref in C.sources for ref in refs)
    assert set(C.sources) == set(refs), "every declared source is used"


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
    [("12.8.1", "570.124.06"), ("12.8.0", "570.26"), ("11.8.89", "520.61.05"), ("12.6.3", "560.35.05")],
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


def test_nccl_ranges_do_not_overlap() -> None:
    rules = sorted(C.nccl_cuda, key=lambda r: vtuple(r.nccl_min))
    for a, b in zip(rules, rules[1:], strict=False):
        assert a.nccl_below is not None and vcmp(a.nccl_below, b.nccl_min) <= 0
    assert C.nccl_cuda_majors("2.21.5") == ["11", "12"]
    assert C.nccl_cuda_majors("2.26.2") == ["12"]
    assert C.nccl_cuda_majors("2.27.7") == ["12", "13"]
    assert C.nccl_cuda_majors("2.7.8") is None


def test_slurm_families_and_os_images() -> None:
    assert {"22.05", "23.02", "23.11", "24.05", "24.11", "25.05"} <= set(C.slurm_families)
    fam = C.slurm_family("24.05.7")
    assert fam is not None and fam.upstream_supported
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
