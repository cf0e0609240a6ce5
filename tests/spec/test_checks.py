"""Semantic spec checks: each bad spec is an example stack with one edit, so every line is real.

Each case asserts the whole message a user sees: file and line, key path, the bad value, what is
valid or the fix, and a did-you-mean where one fits.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from clusterforge.spec.checks import (
    CHECKS,
    Check,
    check_file,
    check_ids,
    cluster,
    health,
    pairings,
    pools,
    pytorch,
    software,
)
from clusterforge.spec.checks.registry import CHECK_CRASHED, UNKNOWN_SUPPRESSION
from clusterforge.spec.loader import Finding

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "stacks"


def variant(tmp_path: Path, stack: str, *edits: tuple[str, str], append: str = "") -> Path:
    text = (STACKS / f"{stack}.yaml").read_text()
    for old, new in edits:
        if text.count(old) != 1:
            raise ValueError(f"edit {old!r} must match exactly once in stacks/{stack}.yaml")
        text = text.replace(old, new)
    path = tmp_path / f"{stack}-variant.yaml"
    path.write_text(text + append)
    return path


def line_of(path: Path, needle: str) -> int:
    """Line of the first (or, for ``text@N``, the Nth) non-comment line containing the text."""
    text, _, nth = needle.partition("@")
    seen = 0
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if text in line and not line.lstrip().startswith("#"):
            seen += 1
            if seen == int(nth or 1):
                return number
    raise ValueError(f"{needle!r} not in {path}")


def only(findings: list[Finding], check_id: str, path: str) -> Finding:
    hits = [f for f in findings if f.check_id == check_id and f.path == path]
    assert len(hits) == 1, "\n".join(f.render() for f in findings)
    return hits[0]


# (case id, stack, edits, text appended, check id, level, key path, text on the reported line, message parts)
CASES = [
    (
        "instance-type-typo",
        "prod",
        [("instance_type: p5.48xlarge", "instance_type: p5.48xlarg")],
        "",
        "instance-type-unknown",
        "error",
        "node_pools[1].instance_type",
        "p5.48xlarg",
        ["unknown instance type 'p5.48xlarg'", "did you mean 'p5.48xlarge'?", "valid: dgx-h100, g5.xlarge"],
    ),
    (
        "local-type-on-aws",
        "prod",
        [("instance_type: m7i.4xlarge", "instance_type: local")],
        "",
        "instance-type-provider",
        "error",
        "node_pools[0].instance_type",
        "instance_type: local",
        ["'local' is a local type but provider.kind is 'aws'", "valid: g5.xlarge"],
    ),
    (
        "aws-type-on-local",
        "local",
        [("    instance_type: local\n    count: 4", "    instance_type: g5.xlarge\n    count: 4")],
        "",
        "instance-type-provider",
        "error",
        "node_pools[1].instance_type",
        "g5.xlarge",
        ["'g5.xlarge' is a aws type but provider.kind is 'local'", "valid: local"],
    ),
    (
        "fabric-manager-differs",
        "prod",
        [("fabric_manager: 580.105.08", "fabric_manager: 580.95.05")],
        "",
        "fabric-manager",
        "error",
        "software.fabric_manager",
        "fabric_manager: 580.95.05",
        ["fabric_manager 580.95.05 != driver.version 580.105.08", "set fabric_manager: 580.105.08"],
    ),
    (
        "fabric-manager-missing",
        "prod",
        [("  fabric_manager: 580.105.08\n", "")],
        "",
        "fabric-manager",
        "error",
        "software",
        "software:",
        ["'gpu' (p5.48xlarge) has NVSwitch", "set software.fabric_manager to the driver version, 580.105.08"],
    ),
    (
        "driver-older-than-cuda",
        "prod",
        [
            ('{branch: "580", version: 580.105.08', '{branch: "560", version: 560.35.05'),
            ("fabric_manager: 580.105.08", "fabric_manager: 560.35.05"),
        ],
        "",
        "cuda-driver",
        "error",
        "software.driver.version",
        "driver: {",
        ["driver 560.35.05 is older than CUDA 12.8.1 needs: >= 570.124.06", "minor version compatibility"],
    ),
    (
        "driver-branch-end-of-life",
        "prod",
        [
            ('{branch: "580", version: 580.105.08', '{branch: "570", version: 570.133.20'),
            ("fabric_manager: 580.105.08", "fabric_manager: 570.133.20"),
        ],
        "",
        "driver-lifecycle",
        "warning",
        "software.driver.branch",
        "driver: {",
        ["driver branch 570 reached end of life (2026-02", "supported branches: 580"],
    ),
    (
        "cuda-release-unknown",
        "prod",
        [("cuda: 12.8.1", "cuda: 12.7.0")],
        "",
        "cuda-driver",
        "error",
        "software.cuda",
        "cuda: 12.7.0",
        ["unknown CUDA release 12.7.0", "valid: 11.8, 12.0", "12.8"],
    ),
    (
        "driver-branch-mismatch",
        "prod",
        [('{branch: "580", version', '{branch: "575", version')],
        "",
        "driver-branch",
        "error",
        "software.driver.version",
        "driver: {",
        ["driver.version 580.105.08 is not on driver.branch 575", 'set branch: "580"'],
    ),
    (
        "distro-driver-wrong-branch",
        "local",
        [('{branch: "535", version: 535.261.03', '{branch: "550", version: 550.54.15')],
        "",
        "driver-branch",
        "error",
        "software.driver.branch",
        "driver: {",
        ["debian-12's own archive carries driver branch 535, not 550", "source: cuda-repo"],
    ),
    (
        "b200-proprietary-module",
        "prod",
        [
            ("instance_type: p5.48xlarge", "instance_type: p6-b200.48xlarge"),
            (
                "kernel_module: open, source: cuda-repo}\n  cuda",
                "kernel_module: proprietary, source: cuda-repo}\n  cuda",
            ),
        ],
        "",
        "kernel-module",
        "error",
        "software.driver.kernel_module",
        "driver: {",
        ["B200 (pool 'gpu') works only with kernel_module 'open'", "got 'proprietary'"],
    ),
    (
        "b200-cuda-too-old",
        "prod",
        [
            ("instance_type: p5.48xlarge", "instance_type: p6-b200.48xlarge"),
            ('{branch: "580", version: 580.105.08', '{branch: "560", version: 560.35.05'),
            ("fabric_manager: 580.105.08", "fabric_manager: 560.35.05"),
            ("cuda: 12.8.1", "cuda: 12.6.3"),
        ],
        "",
        "gpu-driver-cuda",
        "error",
        "software.cuda",
        "cuda: 12.6.3",
        ["CUDA 12.6.3 cannot build for B200 (sm_100, pool 'gpu')", "needs CUDA >= 12.8"],
    ),
    (
        "efa-without-placement-group",
        "prod",
        [("    placement_group: {strategy: cluster, name: prod-gpu-reserved}\n", "")],
        "",
        "efa-placement-group",
        "error",
        "node_pools[1]",
        "- name: gpu",
        ["EFA type 'p5.48xlarge' (32 EFA interfaces) without a placement_group", "{strategy: cluster}"],
    ),
    (
        "efa-partition-strategy",
        "prod",
        [("placement_group: {strategy: cluster,", "placement_group: {strategy: partition,")],
        "",
        "efa-placement-group",
        "warning",
        "node_pools[1].placement_group.strategy",
        "strategy: partition",
        ["strategy 'partition'", "want 'cluster'"],
    ),
    (
        "efa-without-aws-ofi-nccl",
        "prod",
        [("  aws_ofi_nccl: 1.14.2\n", "")],
        "",
        "efa-software",
        "error",
        "software",
        "software:",
        ["uses EFA (p5.48xlarge, 32 interfaces)", "software.aws_ofi_nccl is not set"],
    ),
    (
        "nccl-not-built-for-cuda-13",
        "prod",
        [
            ('{branch: "580", version: 580.105.08', '{branch: "580", version: 580.65.06'),
            ("fabric_manager: 580.105.08", "fabric_manager: 580.65.06"),
            ("cuda: 12.8.1", "cuda: 13.0.0"),
        ],
        "",
        "nccl-cuda",
        "error",
        "software.nccl",
        "nccl: 2.26.2",
        [
            "NCCL 2.26.2 is built for CUDA 12, not CUDA 13",
            "software.cuda 13.0.0",
            "pick an NCCL built for CUDA 13",
        ],
    ),
    (
        "aws-ofi-nccl-below-p5-floor",
        "prod",
        [("aws_ofi_nccl: 1.14.2", "aws_ofi_nccl: 1.7.1")],
        "",
        "instance-software-floors",
        "error",
        "software.aws_ofi_nccl",
        "aws_ofi_nccl: 1.7.1",
        ["aws_ofi_nccl 1.7.1 is below the p5.48xlarge minimum 1.7.2"],
    ),
    (
        "aws-ofi-nccl-below-p6-b200-floor",
        "prod",
        [("instance_type: p5.48xlarge", "instance_type: p6-b200.48xlarge")],
        "",
        "instance-software-floors",
        "error",
        "software.aws_ofi_nccl",
        "aws_ofi_nccl: 1.14.2",
        ["aws_ofi_nccl 1.14.2 is below the p6-b200.48xlarge minimum 1.15.0", "pool 'gpu'"],
    ),
    (
        "nccl-older-than-aws-ofi-nccl-supports",
        "prod",
        [("  nccl: 2.26.2\n", "  nccl: 2.16.5\n")],
        "",
        "efa-software",
        "error",
        "software.nccl",
        "nccl: 2.16.5",
        [
            "aws_ofi_nccl 1.14.2 supports NCCL 2.17.1 and later",
            "nccl 2.16.5 is older",
            "pick an older aws_ofi_nccl",
        ],
    ),
    (
        "nccl-below-p5-recommendation",
        "prod",
        [("nccl: 2.26.2", "nccl: 2.18.3")],
        "",
        "instance-software-floors",
        "warning",
        "software.nccl",
        "nccl: 2.18.3",
        ["nccl 2.18.3 works on p5.48xlarge but 2.18.5 or later is recommended"],
    ),
    (
        "efa-sync-memops",
        "prod",
        [("efa_installer: 1.40.0", "efa_installer: 1.28.0")],
        "",
        "efa-nccl-env",
        "warning",
        "software.efa_installer",
        "efa_installer: 1.28.0",
        ["FI_EFA_SET_CUDA_SYNC_MEMOPS=0", "upgrade efa_installer to >= 1.29.1"],
    ),
    (
        "count-over-reservation",
        "prod",
        [("    count: 16\n", "    count: 20\n")],
        "",
        "capacity-reservation",
        "error",
        "node_pools[1].count",
        "count: 20",
        ["count 20 is more than the reservation holds (capacity_reservation_size 16)", "<= 16"],
    ),
    (
        "reservation-and-block",
        "prod",
        [
            (
                "capacity_reservation_size: 16\n",
                "capacity_reservation_size: 16\n    capacity_block_id: cr-0123456789abcdef0\n",
            )
        ],
        "",
        "capacity-reservation",
        "error",
        "node_pools[1].capacity_block_id",
        "capacity_block_id",
        [
            "sets both capacity_reservation_id (cr-0a1b2c3d4e5f60718)",
            "capacity_block_id (cr-0123456789abcdef0)",
        ],
    ),
    (
        "subnet-outside-vpc",
        "prod",
        [("    gpu: 10.0.0.0/19", "    gpu: 10.1.0.0/19")],
        "",
        "network-cidrs",
        "error",
        "network.subnets.gpu",
        "gpu: 10.1.0.0/19",
        ["subnet 10.1.0.0/19 is outside the VPC 10.0.0.0/16"],
    ),
    (
        "subnets-overlap",
        "prod",
        [("    head: 10.0.32.0/24", "    head: 10.0.31.0/24")],
        "",
        "network-cidrs",
        "error",
        "network.subnets.head",
        "head: 10.0.31.0/24",
        ["subnet head 10.0.31.0/24 overlaps subnet gpu 10.0.0.0/19"],
    ),
    (
        "gpu-pool-without-profile",
        "prod",
        [("    certification: production\n", "")],
        "",
        "certification-profile",
        "error",
        "node_pools[1]",
        "- name: gpu",
        ["gpu pool 'gpu' has no certification profile", "defined: production"],
    ),
    (
        "profile-name-typo",
        "prod",
        [("    certification: production\n", "    certification: prodution\n")],
        "",
        "certification-profile",
        "error",
        "node_pools[1].certification",
        "certification: prodution",
        ["unknown certification profile 'prodution'", "did you mean 'production'?"],
    ),
    (
        "threshold-key-typo",
        "prod",
        [],
        "      thresholds: {nccl.all_reduce.1node.busbw_gb: 380}\n",
        "threshold-overrides",
        "error",
        "certification.profiles.production.thresholds.nccl.all_reduce.1node.busbw_gb",
        "thresholds:",
        [
            "unknown threshold key 'nccl.all_reduce.1node.busbw_gb' for p5.48xlarge",
            "nccl.all_reduce.1node.busbw_gbps",
        ],
    ),
    (
        "partition-unknown-pool",
        "prod",
        [("{name: gpu, pools: [gpu], default: true}", "{name: gpu, pools: [gpus], default: true}")],
        "",
        "partitions",
        "error",
        "orchestration.partitions[0].pools[0]",
        "pools: [gpus]",
        ["partition 'gpu' names unknown pool 'gpus'", "did you mean 'gpu'?"],
    ),
    (
        "duplicate-pool-name",
        "prod",
        [("  - name: head\n", "  - name: gpu\n")],
        "",
        "pool-names-unique",
        "error",
        "node_pools[1].name",
        "- name: gpu@2",
        ["duplicate pool name 'gpu' (first used by node_pools[0])"],
    ),
    (
        "no-head-pool",
        "prod",
        [("    role: head\n", "    role: login\n")],
        "",
        "head-pool",
        "error",
        "node_pools",
        "node_pools:",
        ["no pool with role 'head'", "count: 1"],
    ),
    (
        "two-head-nodes",
        "dev",
        [("    instance_type: m7i.xlarge\n    count: 1", "    instance_type: m7i.xlarge\n    count: 2")],
        "",
        "head-pool",
        "error",
        "node_pools[0].count",
        "count: 2",
        ["head pool 'head' has count 2; it must be 1"],
    ),
    (
        "gpu-pool-on-cpu-type",
        "dev",
        [("instance_type: g5.xlarge", "instance_type: m7i.xlarge")],
        "",
        "pool-role-hardware",
        "error",
        "node_pools[1].instance_type",
        "instance_type: m7i.xlarge@2",
        ["pool 'gpu' has role 'gpu' but 'm7i.xlarge' has no GPU", "GPU types: g5.xlarge"],
    ),
    (
        "fsx-on-local",
        "local",
        [
            (
                "storage:\n  shared_volume: {name: shared, mount_point: /shared}\n",
                "storage:\n  fsx_lustre: {storage_capacity_gib: 1200, per_unit_storage_throughput: 125}\n",
            )
        ],
        "",
        "storage-provider",
        "error",
        "storage.fsx_lustre",
        "fsx_lustre",
        ["storage.fsx_lustre is not available on provider 'local'", "valid: shared_volume"],
    ),
    (
        "fsx-capacity-step",
        "prod",
        [("storage_capacity_gib: 48000", "storage_capacity_gib: 3000")],
        "",
        "fsx-settings",
        "error",
        "storage.fsx_lustre.storage_capacity_gib",
        "storage_capacity_gib: 3000",
        ["3000 GiB is not a valid PERSISTENT_2 size", "steps of 2400 (e.g. 4800)"],
    ),
    (
        "slurm-family-unknown",
        "prod",
        [("slurm: 25.11.2", "slurm: 24.03.1")],
        "",
        "slurm-family",
        "error",
        "software.slurm",
        "slurm: 24.03.1",
        ["24.03.1 is not in a Slurm release family", "families: 22.05, 23.02"],
    ),
    (
        "os-image-on-local",
        "local",
        [("os_image: debian-12", "os_image: ubuntu-22.04")],
        "",
        "os-image-provider",
        "error",
        "software.os_image",
        "os_image: ubuntu-22.04",
        ["os_image 'ubuntu-22.04' is not supported on provider 'local'", "valid: debian-12"],
    ),
    (
        "zone-outside-region",
        "prod",
        [("availability_zone: us-east-1a", "availability_zone: us-west-2a")],
        "",
        "aws-provider",
        "error",
        "provider.availability_zone",
        "availability_zone: us-west-2a",
        ["availability zone 'us-west-2a' is not in region 'us-east-1'", "us-east-1a"],
    ),
    (
        "ssh-open-to-world",
        "dev",
        [("admin_cidrs: [203.0.113.0/24]", "admin_cidrs: [0.0.0.0/0]")],
        "",
        "aws-provider",
        "warning",
        "provider.admin_cidrs[0]",
        "admin_cidrs: [0.0.0.0/0]",
        ["0.0.0.0/0 opens SSH to the whole internet"],
    ),
    (
        "pyxis-without-enroot",
        "prod",
        [("  enroot: 3.5.0\n", "")],
        "",
        "container-stack",
        "error",
        "software.pyxis",
        "pyxis: 0.21.0",
        ["pyxis runs containers through enroot: set software.enroot"],
    ),
    (
        "suppress-unknown-id",
        "prod",
        [],
        "suppress_checks: [fabric-manger]\n",
        UNKNOWN_SUPPRESSION,
        "warning",
        "suppress_checks[0]",
        "suppress_checks",
        ["unknown check id 'fabric-manger'", "did you mean 'fabric-manager'?"],
    ),
]


@pytest.mark.parametrize(
    ("stack", "edits", "append", "check_id", "level", "path", "needle", "parts"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_bad_spec(
    tmp_path: Path,
    stack: str,
    edits: list[tuple[str, str]],
    append: str,
    check_id: str,
    level: str,
    path: str,
    needle: str,
    parts: list[str],
) -> None:
    spec_file = variant(tmp_path, stack, *edits, append=append)
    report = check_file(spec_file)
    finding = only(report.findings, check_id, path)
    assert finding.level == level
    assert finding.file == str(spec_file)
    assert finding.line == line_of(spec_file, needle)
    rendered = finding.render()
    assert rendered.startswith(f"{spec_file}:{finding.line}: {path}: ")
    for part in parts:
        assert part in rendered
    assert report.ok is (level != "error")


def test_enough_distinct_bad_spec_cases() -> None:
    assert len({case[0] for case in CASES}) >= 25
    assert len({case[4] for case in CASES}) >= 25  # they exercise many different checks


def test_duplicate_pool_reported_on_second_pool_line(tmp_path: Path) -> None:
    spec_file = variant(tmp_path, "prod", ("  - name: head\n", "  - name: gpu\n"))
    finding = only(check_file(spec_file).findings, "pool-names-unique", "node_pools[1].name")
    text = spec_file.read_text().splitlines()
    assert text[finding.line - 1].strip() == "- name: gpu"
    assert text[finding.line].strip() == "role: gpu"


def test_every_error_reported_at_once_and_warnings_apart(tmp_path: Path) -> None:
    spec_file = variant(
        tmp_path,
        "prod",
        ("instance_type: m7i.4xlarge", "instance_type: m7i.4xlarg"),
        ("fabric_manager: 580.105.08", "fabric_manager: 580.95.05"),
        ("    count: 16\n", "    count: 20\n"),
        ("efa_installer: 1.40.0", "efa_installer: 1.28.0"),
    )
    report = check_file(spec_file)
    assert {f.check_id for f in report.errors} == {
        "instance-type-unknown",
        "fabric-manager",
        "capacity-reservation",
    }
    # prod's own warnings: its driver, CUDA and container toolkit pins are below NVIDIA's security floors
    # (compatibility.yaml security_floors); the EFA installer edit adds its own
    assert [f.check_id for f in report.warnings] == [
        "security-floor",
        "security-floor",
        "efa-nccl-env",
        "security-floor",
    ]
    lines = [f.line or 0 for f in report.errors]
    assert lines == sorted(lines)
    assert report.findings.index(report.warnings[0]) > report.findings.index(report.errors[-1])


def test_suppress_in_spec_and_by_argument(tmp_path: Path) -> None:
    bad = (("fabric_manager: 580.105.08", "fabric_manager: 580.95.05"),)
    assert not check_file(variant(tmp_path, "prod", *bad)).ok
    by_spec = check_file(variant(tmp_path, "prod", *bad, append="suppress_checks: [fabric-manager]\n"))
    assert by_spec.ok and by_spec.suppressed == ["fabric-manager"]
    by_arg = check_file(variant(tmp_path, "prod", *bad), suppress=["fabric-manager"])
    assert by_arg.ok and by_arg.suppressed == ["fabric-manager"]


def test_a_crashing_check_becomes_an_error_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: Check, ctx: object) -> list:
        raise KeyError("no such thing")

    monkeypatch.setattr(software.FabricManager, "run", boom)
    report = check_file(STACKS / "prod.yaml")
    crashed = [f for f in report.errors if f.check_id == CHECK_CRASHED]
    assert len(crashed) == 1
    assert "check fabric-manager failed: KeyError: 'no such thing'" in crashed[0].message
    assert any(f.check_id == "slurm-family" for f in check_file(STACKS / "local.yaml").findings)


def test_skip_checks_against_validator_ids(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "validator_check_ids", lambda: ["gpu-count", "nccl-all-reduce", "xid-log"])
    spec_file = variant(tmp_path, "prod", append="      skip_checks: [nccl-allreduce]\n")
    finding = only(
        check_file(spec_file).findings, "skip-checks", "certification.profiles.production.skip_checks[0]"
    )
    assert "unknown validator check 'nccl-allreduce' (did you mean 'nccl-all-reduce'?)" in finding.message
    assert finding.line == line_of(spec_file, "skip_checks")


def test_example_stacks_have_no_errors() -> None:
    for stack in ("local", "dev", "prod"):
        report = check_file(STACKS / f"{stack}.yaml")
        assert report.ok, "\n".join(f.render() for f in report.errors)


def test_registry_is_complete_and_ids_are_stable_kebab_case() -> None:
    defined = {
        obj
        for module in (pools, software, cluster, pytorch, pairings, health)
        for _name, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, Check) and obj is not Check and obj.__module__ == module.__name__
    }
    assert defined == set(CHECKS), "every Check class must be listed in registry.CHECKS, and only once"
    ids = check_ids()
    assert len(ids) == len(set(ids))
    for check in CHECKS:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", check.id), check.id
        assert check.summary and not check.summary.endswith(".")


def test_skip_checks_against_the_real_validators_registry(tmp_path: Path) -> None:
    if cluster.validator_check_ids() is None:
        pytest.skip("validators registry not importable")
    good = check_file(variant(tmp_path, "local", append="      skip_checks: [gpu-burn, dcgm-diag]\n"))
    assert not [f for f in good.findings if f.check_id == "skip-checks"]
    bad = check_file(variant(tmp_path, "local", append="      skip_checks: [gpu-burnin]\n"))
    finding = only(bad.findings, "skip-checks", "certification.profiles.local.skip_checks[0]")
    assert "unknown validator check 'gpu-burnin'" in finding.message


def test_threshold_keys_follow_the_pool_type(tmp_path: Path) -> None:
    ok = check_file(
        variant(
            tmp_path,
            "local",
            append="      thresholds: {gloo.all_reduce.2node.busbw_gbps: 0.2, matmul.median_gap_pct: 8}\n",
        )
    )
    assert ok.ok, "\n".join(f.render() for f in ok.findings)
    bad = check_file(
        variant(tmp_path, "local", append="      thresholds: {nccl.all_reduce.2node.busbw_gbps: 0.2}\n")
    )
    path = "certification.profiles.local.thresholds.nccl.all_reduce.2node.busbw_gbps"
    finding = only(bad.findings, "threshold-overrides", path)
    assert "unknown threshold key 'nccl.all_reduce.2node.busbw_gbps' for local" in finding.message
    assert "did you mean 'gloo.all_reduce.2node.busbw_gbps'?" in finding.message


def test_loosening_a_floor_by_more_than_half_warns(tmp_path: Path) -> None:
    report = check_file(variant(tmp_path, "prod", append="      thresholds: {matmul.tflops_min: 100}\n"))
    finding = only(
        report.findings,
        "threshold-overrides",
        "certification.profiles.production.thresholds.matmul.tflops_min",
    )
    assert finding.level == "warning" and "under half the catalogue floor 640.0" in finding.message


STATIC_SPEC = """\
stack: metal
provider: {kind: static, inventory: INVENTORY}
node_pools:
  - {name: head, role: head, instance_type: m7i.xlarge, count: 1}
  - {name: gpu, role: gpu, instance_type: p4d.24xlarge, count: 2, certification: std,
     cpu_topology: {sockets: 2, cores_per_socket: 24, threads_per_core: 2}}
storage:
  nfs: {server: 10.1.0.5, export: /export/shared}
software:
  os_image: ubuntu-22.04
  driver: {branch: "550", version: 550.54.15, kernel_module: proprietary}
  cuda: 12.4.1
  nccl: 2.21.5
  fabric_manager: 550.54.15
  slurm: 24.11.1
orchestration:
  partitions: [{name: gpu, pools: [gpu], default: true}]
certification:
  profiles:
    std: {suite: standard}
"""


def test_static_spec_and_its_inventory(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    spec_file = tmp_path / "metal.yaml"
    spec_file.write_text(STATIC_SPEC.replace("INVENTORY", str(inventory)))
    missing = only(check_file(spec_file).findings, "static-inventory", "provider.inventory")
    assert f"inventory '{inventory}' does not exist" in missing.message and missing.line == 2
    inventory.write_text("all: {}\n")
    report = check_file(spec_file)
    assert report.ok, "\n".join(f.render() for f in report.findings)


def test_aws_ofi_nccl_needs_nccl(tmp_path: Path) -> None:
    report = check_file(variant(tmp_path, "prod", ("  nccl: 2.26.2\n", "")))
    messages = [f.message for f in report.errors if f.check_id == "efa-software"]
    assert "aws_ofi_nccl is NCCL's network plugin: set software.nccl as well" in messages
    assert any("software.nccl is not set" in m for m in messages)


def test_provider_preflight_ids_are_known_to_suppress_checks(tmp_path: Path) -> None:
    """AWS preflight findings are silenced through the same key: their ids are not 'unknown'."""
    report = check_file(variant(tmp_path, "prod", append="suppress_checks: [vcpu-quota]\n"))
    assert report.ok
    assert not [f for f in report.findings if f.check_id == "suppress-unknown"]
    typo = check_file(variant(tmp_path, "prod", append="suppress_checks: [vcpu-quotta]\n"))
    unknown = [f for f in typo.findings if f.check_id == "suppress-unknown"]
    assert unknown and "did you mean 'vcpu-quota'" in unknown[0].message


def test_fleet_rule_overrides_are_checked(tmp_path: Path) -> None:
    ok = check_file(
        variant(
            tmp_path,
            "local",
            append="      thresholds: {fleet.fail_gap_pct: 40, fleet.shared-storage.write_rate.warn_gap_pct: 20}\n",
        )
    )
    assert ok.ok, "\n".join(f.render() for f in ok.findings)
    typo = check_file(
        variant(tmp_path, "local", append="      thresholds: {fleet.matmul.fail_gap_pct: 40}\n")
    )
    finding = only(
        typo.findings,
        "threshold-overrides",
        "certification.profiles.local.thresholds.fleet.matmul.fail_gap_pct",
    )
    assert "unknown threshold key 'fleet.matmul.fail_gap_pct'" in finding.message
    assert "fleet.[<metric>.]warn_gap_pct|fail_gap_pct|z_warn" in finding.message
    pct = check_file(variant(tmp_path, "local", append="      thresholds: {fleet.fail_gap_pct: 140}\n"))
    finding = only(
        pct.findings, "threshold-overrides", "certification.profiles.local.thresholds.fleet.fail_gap_pct"
    )
    assert "0 < value < 100 (got 140" in finding.message
    # local's catalogue fail gap is 25 %: a warn gap of 70 would never warn before failing
    order = check_file(variant(tmp_path, "local", append="      thresholds: {fleet.warn_gap_pct: 70}\n"))
    finding = only(
        order.findings, "threshold-overrides", "certification.profiles.local.thresholds.fleet.warn_gap_pct"
    )
    assert "must be under the fail gap 25 %" in finding.message
