"""Security floors: the catalogue parses, every floor names a listed bulletin, and the comparison is numeric."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from clusterforge.catalog import load_compat
from clusterforge.catalog.compat import COMPAT_FILE, read_compat
from clusterforge.catalog.floors import SecurityFloors


@pytest.fixture(scope="module")
def floors() -> SecurityFloors:
    return load_compat().security_floors


def fixes(floors: SecurityFloors, component: str, version: str, branch: str | None = None) -> list[str]:
    return [u.floor.fixed for u in floors.unmet(component, version, branch)]  # type: ignore[arg-type]


def test_every_floor_has_a_dated_bulletin_with_cves_or_a_sourced_defect(floors: SecurityFloors) -> None:
    components = {"driver", "dcgm", "nvidia_container_toolkit", "cuda", "nccl"}
    assert {f.component for f in floors.floors} == components
    for floor in floors.floors:
        if floor.bulletin is not None:
            bulletin = floors.bulletins[floor.bulletin]
            assert bulletin.cves and all(c.startswith("CVE-") for c in bulletin.cves)
        else:
            defect = floors.defects[str(floor.defect)]
            assert defect.source.startswith("https://github.com/NVIDIA/") and defect.what


def test_the_issue_examples_are_floors(floors: SecurityFloors) -> None:
    # CVE-2024-0132 fixed in 1.16.2 (bulletin 5582); CVE-2025-23266 fixed in 1.17.8 (bulletin 5659).
    by_cve = {cve: f.fixed for f in floors.floors if f.bulletin for cve in floors.bulletins[f.bulletin].cves}
    assert by_cve["CVE-2024-0132"] == "1.16.2"
    assert by_cve["CVE-2025-23266"] == "1.17.8"
    # CUDA: "All versions up to CUDA Toolkit 12.8 | CUDA Toolkit 12.8" (5594); 12.6U2 (5577) is 12.6.2.
    assert by_cve["CVE-2024-53870"] == "12.8" and by_cve["CVE-2024-0123"] == "12.6.2"


def test_below_equal_and_above(floors: SecurityFloors) -> None:
    assert fixes(floors, "nvidia_container_toolkit", "1.17.7")[:2] == ["1.19.1", "1.17.8"]
    assert "1.17.8" not in fixes(floors, "nvidia_container_toolkit", "1.17.8")
    assert fixes(floors, "nvidia_container_toolkit", "1.19.1") == []
    assert fixes(floors, "dcgm", "3.1.6") == ["3.1.7"]
    assert fixes(floors, "dcgm", "4.2.3") == []
    assert fixes(floors, "cuda", "12.8") == ["13.1", "13.0", "12.9"]  # 12.8 carries 5594's fixes
    assert fixes(floors, "cuda", "13.1.0") == []


def test_a_defect_covers_its_affected_releases_only(floors: SecurityFloors) -> None:
    assert fixes(floors, "nccl", "2.18.1") == ["2.18.3", "2.18.3"]
    assert fixes(floors, "nccl", "2.17.1") == []  # older than the first affected release
    assert fixes(floors, "nccl", "2.28.3") == ["2.28.7"] and fixes(floors, "nccl", "2.26.2") == []


def test_versions_compare_as_numbers_not_text(floors: SecurityFloors) -> None:
    # As text "570.86.16" > "570.133.07" and "1.17.10" < "1.17.8": a string comparison gets both wrong.
    assert "570.133.07" in fixes(floors, "driver", "570.86.16", "570")
    assert "1.17.8" not in fixes(floors, "nvidia_container_toolkit", "1.17.10")


def test_driver_floors_apply_to_their_own_branch_only(floors: SecurityFloors) -> None:
    assert fixes(floors, "driver", "580.159.03", "580") == []
    assert fixes(floors, "driver", "580.126.09", "580") == ["580.159.03"]
    assert fixes(floors, "driver", "590.48.01", "590") == []  # 595's floor is not 590's
    assert fixes(floors, "driver", "560.35.03", "560") == []  # no bulletin lists R560


def _altered(tmp_path: Path, edit: dict) -> Path:
    data = yaml.safe_load(COMPAT_FILE.read_text())
    data["security_floors"]["floors"].append(edit)
    path = tmp_path / "compat.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ({"component": "dcgm", "fixed": "9.9.9", "bulletin": "1"}, "bulletin '1' not listed"),
        ({"component": "nccl", "fixed": "2.9.9", "defect": "x"}, "defect 'x' not listed"),
        ({"component": "nccl", "fixed": "2.9.9"}, "name a bulletin or a defect"),
        (
            {"component": "nccl", "fixed": "2.9.9", "since": "2.9.9", "defect": "nccl-2.18-collnet"},
            "since 2.9.9 is not before the fix",
        ),
        ({"component": "driver", "fixed": "580.1.1", "bulletin": "5821"}, "a driver floor needs a branch"),
        (
            {"component": "driver", "branch": "570", "fixed": "580.1.1", "bulletin": "5821"},
            "not on branch 570",
        ),
    ],
)
def test_bad_floor_rows_are_refused(tmp_path: Path, edit: dict, expected: str) -> None:
    with pytest.raises(ValidationError, match=expected):
        read_compat(_altered(tmp_path, edit))
