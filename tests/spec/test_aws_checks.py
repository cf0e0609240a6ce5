"""Spec checks for AWS stacks: egress without internet, placement groups against Capacity Blocks
and reservations, provisioned-IOPS root volumes, SSH that nothing can reach. Each bad spec is an
example stack with one edit, as in test_checks.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.spec.checks import check_file
from tests.spec.test_checks import line_of, only, variant

BLOCK = (
    "    capacity_reservation_id: cr-0a1b2c3d4e5f60718\n",
    "    capacity_block_id: cr-0a1b2c3d4e5f60718\n",
)
NO_GROUP = ("    placement_group: {strategy: cluster, name: prod-gpu-reserved}\n", "")
UNNAMED = (
    "placement_group: {strategy: cluster, name: prod-gpu-reserved}",
    "placement_group: {strategy: cluster}",
)
ENDPOINTS = ("  egress: nat\n", "  egress: endpoints\n")

# (case id, stack, edits, check id, level, key path, text on the reported line, message parts)
CASES = [
    (
        "endpoints-without-prebaked-image",
        "prod",
        [ENDPOINTS],
        "aws-provider",
        "error",
        "provider.egress",
        "egress: endpoints",
        ["egress: endpoints leaves the nodes without internet", "use egress: nat", "ami_prebaked: true"],
    ),
    (
        "endpoints-with-an-ami-not-marked-prebaked",
        "prod",
        [ENDPOINTS, ("  connection: ssm\n", "  connection: ssm\n  ami: ami-0fedcba9876543210\n")],
        "aws-provider",
        "error",
        "provider.egress",
        "egress: endpoints",
        ["NVIDIA's CUDA repository"],
    ),
    (
        "prebaked-without-an-ami",
        "prod",
        [("  connection: ssm\n", "  connection: ssm\n  ami_prebaked: true\n")],
        "aws-provider",
        "error",
        "provider.ami_prebaked",
        "ami_prebaked",
        ["without provider.ami"],
    ),
    (
        "capacity-block-with-a-placement-group",
        "prod",
        [BLOCK],
        "efa-placement-group",
        "warning",
        "node_pools[1].placement_group",
        "placement_group:",
        ["Capacity Block cr-0a1b2c3d4e5f60718", "drop placement_group"],
    ),
    (
        "reservation-in-a-group-the-stack-creates",
        "prod",
        [UNNAMED],
        "efa-placement-group",
        "warning",
        "node_pools[1].placement_group",
        "placement_group:",
        ["creates placement group 'prod-gpu'", "set placement_group.name"],
    ),
    (
        "io2-without-iops",
        "prod",
        [
            (
                "root_volume: {size_gib: 1024, type: gp3, iops: 16000, throughput_mibps: 1000}",
                "root_volume: {size_gib: 1024, type: io2}",
            )
        ],
        "root-volume-iops",
        "error",
        "node_pools[1].root_volume.type",
        "type: io2",
        ["'io2' of pool 'gpu' needs iops", "iops: 16000"],
    ),
    (
        "io1-with-gp3-throughput",
        "prod",
        [
            (
                "type: gp3, iops: 16000, throughput_mibps: 1000",
                "type: io1, iops: 16000, throughput_mibps: 1000",
            )
        ],
        "root-volume-iops",
        "error",
        "node_pools[1].root_volume.throughput_mibps",
        "throughput_mibps",
        ["gp3 only, not 'io1'"],
    ),
    (
        "admin-cidrs-on-a-private-head",
        "dev",
        [],
        "aws-provider",
        "warning",
        "provider.admin_cidrs",
        "admin_cidrs",
        ["no public address and no bastion", "connection: ssh-bastion"],
    ),
]


@pytest.mark.parametrize(
    ("stack", "edits", "check_id", "level", "path", "needle", "parts"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_bad_aws_spec(
    tmp_path: Path,
    stack: str,
    edits: list[tuple[str, str]],
    check_id: str,
    level: str,
    path: str,
    needle: str,
    parts: list[str],
) -> None:
    spec_file = variant(tmp_path, stack, *edits)
    report = check_file(spec_file)
    finding = only(report.findings, check_id, path)
    assert finding.level == level
    assert finding.line == line_of(spec_file, needle)
    for part in parts:
        assert part in finding.render()
    assert report.ok is (level != "error")


def test_capacity_block_without_a_placement_group_passes(tmp_path: Path) -> None:
    report = check_file(variant(tmp_path, "prod", BLOCK, NO_GROUP))
    assert report.ok, [f.render() for f in report.errors]
    assert not [f for f in report.findings if f.check_id == "efa-placement-group"]


def test_a_reservation_without_any_group_still_fails(tmp_path: Path) -> None:
    report = check_file(variant(tmp_path, "prod", NO_GROUP))
    finding = only(report.findings, "efa-placement-group", "node_pools[1]")
    assert finding.level == "error" and "without a placement_group" in finding.message


def test_naming_the_reservations_group_silences_the_warning(tmp_path: Path) -> None:
    # prod names it (stacks/prod.yaml: the group the reservation was made in)
    report = check_file(Path(__file__).resolve().parents[2] / "stacks" / "prod.yaml")
    assert not [f for f in report.findings if f.check_id == "efa-placement-group"]
    assert [
        f
        for f in check_file(variant(tmp_path, "prod", UNNAMED)).findings
        if f.check_id == "efa-placement-group"
    ]


def test_endpoints_on_a_prebaked_image_passes(tmp_path: Path) -> None:
    baked = ("  connection: ssm\n", "  connection: ssm\n  ami: ami-0fedcba9876543210\n  ami_prebaked: true\n")
    report = check_file(variant(tmp_path, "prod", ENDPOINTS, baked))
    assert not [f for f in report.findings if f.path == "provider.egress"]


def test_the_prod_example_works_as_written() -> None:
    report = check_file(Path(__file__).resolve().parents[2] / "stacks" / "prod.yaml")
    assert report.ok and report.spec is not None and report.spec.provider.egress == "nat"


def test_local_scratch_is_for_machines_with_disks(tmp_path: Path) -> None:
    scratch = ("storage:\n", "storage:\n  local_scratch: {mount_point: /scratch}\n")
    assert check_file(variant(tmp_path, "prod", scratch)).ok
    report = check_file(variant(tmp_path, "local", ("storage:\n", "storage:\n  local_scratch: {}\n")))
    finding = only(report.findings, "storage-provider", "storage.local_scratch")
    assert finding.level == "error" and "not available on provider 'local'" in finding.message
