"""DCGM x CUDA and Slurm x node topology (compatibility.yaml dcgm_cuda, slurm_node_topology):
the example stack moved the way its own warnings used to push it is refused, naming the rule and
the fix; the example itself passes with no warning at all."""

from __future__ import annotations

from pathlib import Path

from clusterforge.catalog import load_hardware
from clusterforge.inventory import slurm_vars
from clusterforge.providers.base import Node
from clusterforge.spec.checks import check_file
from clusterforge.spec.loader import load_spec
from tests.spec.test_checks import STACKS, line_of, only, variant


def test_prod_raises_no_warning_of_its_own() -> None:
    # but the security floors (issue 28): its driver, container toolkit and CUDA pins predate NVIDIA's
    # 2026 bulletins (tests/spec/test_security_floor.py); nothing from these pairings
    report = check_file(STACKS / "prod.yaml")
    assert report.ok, "\n".join(f.render() for f in report.findings)
    assert [f.check_id for f in report.warnings] == ["security-floor"] * 3, [
        f.render() for f in report.findings
    ]


def test_driver_580_with_dcgm_4_2_3_is_refused_naming_the_rule_and_the_fix(tmp_path: Path) -> None:
    spec_file = variant(tmp_path, "prod", ("dcgm: 4.4.1", "dcgm: 4.2.3"))
    report = check_file(spec_file)
    finding = only(report.findings, "dcgm-cuda", "software.dcgm")
    assert finding.level == "error" and not report.ok
    assert finding.line == line_of(spec_file, "dcgm: 4.2.3")
    text = finding.render()
    for part in (
        "DCGM 4.2.3 has no datacenter-gpu-manager-4-cuda13 package",
        "driver 580.105.08 (CUDA 13)",
        "rule dcgm_cuda in compatibility.yaml: -cuda13 from DCGM 4.4.1",
        "set software.dcgm to 4.4.1 or later",
    ):
        assert part in text, text


def test_dcgm_4_2_3_stays_fine_on_a_570_driver(tmp_path: Path) -> None:
    spec_file = variant(
        tmp_path,
        "prod",
        ('{branch: "580", version: 580.105.08', '{branch: "570", version: 570.133.20'),
        ("fabric_manager: 580.105.08", "fabric_manager: 570.133.20"),
        ("dcgm: 4.4.1", "dcgm: 4.2.3"),
    )
    assert not [f for f in check_file(spec_file).findings if f.check_id == "dcgm-cuda"]


def test_slurm_25_11_without_a_node_topology_is_refused_naming_the_rule_and_the_fix(tmp_path: Path) -> None:
    # p6-b300.48xlarge: eight B300 on EFA, and no CPU topology in the catalogue (none was sourced).
    spec_file = variant(tmp_path, "prod", ("instance_type: p5.48xlarge", "instance_type: p6-b300.48xlarge"))
    report = check_file(spec_file)
    finding = only(report.findings, "slurm-node-topology", "node_pools[1].cpu_topology")
    assert finding.level == "error" and not report.ok
    assert finding.line == line_of(spec_file, "- name: gpu")
    text = finding.render()
    for part in (
        "Slurm 25.11 (>= 24.11) sets a GPU node invalid",
        "rule slurm_node_topology in compatibility.yaml",
        "p6-b300.48xlarge (pool 'gpu') has no CPU topology",
        "CPUs=192 alone",
        "Set node_pools[1].cpu_topology {sockets, cores_per_socket, threads_per_core} from `slurmd -C`",
    ):
        assert part in text, text


def test_the_pool_topology_fixes_it_and_must_add_up(tmp_path: Path) -> None:
    fixed = variant(
        tmp_path,
        "prod",
        ("instance_type: p5.48xlarge", "instance_type: p6-b300.48xlarge"),
        (
            "    certification: production\n",
            "    certification: production\n    cpu_topology: {sockets: 2, cores_per_socket: 48, threads_per_core: 2}\n",
        ),
    )
    assert not [f for f in check_file(fixed).findings if f.check_id == "slurm-node-topology"]
    wrong = variant(
        tmp_path,
        "prod",
        (
            "    certification: production\n",
            "    certification: production\n    cpu_topology: {sockets: 2, cores_per_socket: 24, threads_per_core: 2}\n",
        ),
    )
    finding = only(check_file(wrong).findings, "slurm-node-topology", "node_pools[1].cpu_topology")
    assert "= 96 CPUs, but p5.48xlarge has 192 vCPUs" in finding.message


def test_below_24_11_no_topology_is_needed(tmp_path: Path) -> None:
    spec_file = variant(
        tmp_path,
        "prod",
        ("instance_type: p5.48xlarge", "instance_type: p6-b300.48xlarge"),
        ("slurm: 25.11.2", "slurm: 24.05.7"),
    )
    assert not [f for f in check_file(spec_file).findings if f.check_id == "slurm-node-topology"]


def test_prod_node_lines_carry_the_p5_topology() -> None:
    spec, _ = load_spec(STACKS / "prod.yaml")
    nodes = [
        Node("head-001", "10.0.32.10", "head", "head", "m7i.4xlarge", {}),
        Node("gpu-001", "10.0.0.10", "gpu", "gpu", "p5.48xlarge", {}),
    ]
    out = slurm_vars(spec, nodes, load_hardware(), Path("/state/prod/munge.key"))
    node = out["slurm_nodes"][0]
    assert (node["cpus"], node["sockets"], node["cores_per_socket"], node["threads_per_core"]) == (
        192,
        2,
        48,
        2,
    )
