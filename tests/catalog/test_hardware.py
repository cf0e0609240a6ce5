"""The hardware catalogue: every figure sourced, AWS figures equal to DescribeInstanceTypes,
thresholds consistent with the hardware they describe."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from clusterforge.catalog import load_hardware
from clusterforge.catalog.hardware import (
    HARDWARE_FILE,
    Thresholds,
    busbw_bound,
    line_rate_per_direction,
    read_hardware,
)
from clusterforge.certify.network.jobs import PAIR_ALGORITHM
from clusterforge.strict_yaml import DuplicateKeyError

HW = load_hardware()
AWS_TYPES = HW.names(provider="aws")
REQUIRED = {
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6-b200.48xlarge",
    "g5.xlarge",
    "m7i.xlarge",
    "m7i.4xlarge",
    "local",
}


@pytest.fixture(scope="module")
def describe_instance_types() -> dict:
    """AWS's own DescribeInstanceTypes data as moto ships it (the source the catalogue cites)."""
    moto = pytest.importorskip("moto")
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path) as fh:
        return json.load(fh)


def network_performance_gbps(text: str) -> float:
    """AWS's NetworkPerformance text: '3200 Gigabit', '4x 100 Gigabit', 'Up to 12.5 Gigabit'."""
    match = re.fullmatch(r"(?:Up to )?(?:(\d+)x )?([\d.]+) Gigabit", text)
    assert match, text
    return float(match.group(2)) * int(match.group(1) or 1)


def test_network_performance_text() -> None:
    assert network_performance_gbps("4x 100 Gigabit") == 400
    assert network_performance_gbps("Up to 12.5 Gigabit") == 12.5
    assert network_performance_gbps("3200 Gigabit") == 3200


def test_required_types_present() -> None:
    assert set(HW.names()) >= REQUIRED


def test_every_section_cites_declared_sources() -> None:
    for it in HW.instance_types.values():
        sections = [it.source, it.network.source, HW.common_thresholds.source]
        if it.gpu:
            sections.append(it.gpu.source)
        if it.thresholds.matmul_tflops_min or it.thresholds.cpu_matmul_gflops_min:
            sections.append(it.thresholds.source)
        sections += [t.source for t in it.thresholds.nccl]
        for refs in sections:
            assert refs, f"{it.name}: a section has no source"
            assert all(ref in HW.sources and HW.sources[ref].strip() for ref in refs)


def test_every_declared_source_is_used() -> None:
    used = {ref for p in HW.provenance() for ref in p.source}
    assert used == set(HW.sources)


# Figures no public source states outright. Adding one here is a decision: its note must say what it
# was derived from. A figure that gains a measured source leaves this list (and loses `estimate`).
_NCCL = "instance_types.{}.thresholds.nccl.{}.{}node.busbw_gbps"
_GPU8 = (
    "p4d.24xlarge",
    "p4de.24xlarge",
    "p5.48xlarge",
    "p5e.48xlarge",
    "p5en.48xlarge",
    "p6-b200.48xlarge",
    "dgx-h100",
    "p6-b300.48xlarge",
)
ESTIMATES = {
    "common_thresholds": "Azure's GPU GEMM bands",
    "instance_types.g5.xlarge.thresholds": "No measured A10G matmul rate",
    "instance_types.local.thresholds": "deliberately loose",
    "instance_types.local.fleet": "benchmarks/fleet_spread.py",
    "instance_types.local.share": "what the head node and the workstation need",
    "instance_types.local.thresholds.gloo.all_reduce.1node.busbw_gbps": "loose",
    "instance_types.local.thresholds.gloo.all_reduce.2node.busbw_gbps": "loose on purpose",
    # No 2-node figure of the type itself: derived from p5's (same line rate) or another node count.
    _NCCL.format("p5e.48xlarge", "all_reduce", 2): "No published 2-node p5e figure",
    _NCCL.format("p5en.48xlarge", "all_reduce", 2): "No published 2-node p5en figure",
    _NCCL.format("p6-b200.48xlarge", "all_reduce", 2): "No published 2-node figure",
    _NCCL.format("dgx-h100", "all_reduce", 2): "0.8 x 0.96 L",
    # Collectives without a published figure on the type: bounds and the all_reduce floors.
    **{_NCCL.format(t, c, 2): "no published" for t in _GPU8 for c in ("all_gather", "reduce_scatter")},
    **{_NCCL.format(t, "alltoall", 2): "a quarter of that bound" for t in _GPU8},
    **{_NCCL.format(t, "alltoall", 1): "loose on purpose" for t in _GPU8},
    **{
        _NCCL.format(t, c, 1): "No published"
        for t in _GPU8[:2] + _GPU8[5:6] + _GPU8[7:]
        for c in ("all_gather", "reduce_scatter")
    },
    # issue 23: CPU topologies (Slurm >= 24.11 node lines) and the floors of the newer types
    "instance_types.p5.48xlarge.cpu": "Derived, not read from a p5 node",
    "instance_types.g5.xlarge.cpu": "DefaultCores 2 x DefaultThreadsPerCore 2",
    "instance_types.g6.xlarge.cpu": "DefaultCores 2 x DefaultThreadsPerCore 2",
    "instance_types.g6e.xlarge.cpu": "DefaultCores 2 x DefaultThreadsPerCore 2",
    "instance_types.p6-b300.48xlarge.thresholds": "No B300 matmul measurement found",
    "instance_types.p6-b300.48xlarge.thresholds.nccl.all_reduce.1node.busbw_gbps": "No 8x B300 figure found",
    "instance_types.p6-b300.48xlarge.thresholds.nccl.all_reduce.2node.busbw_gbps": "No 2-node p6-b300 figure",
    "instance_types.g6.xlarge.thresholds": "No measured L4 matmul rate",
    "instance_types.g6e.xlarge.thresholds": "No measured L40S matmul rate",
}


def test_every_figure_is_sourced_or_an_explained_estimate() -> None:
    every = HW.provenance()
    assert all(p.source for p in every), [p.where for p in every if not p.source]
    estimates = {p.where: p.note for p in HW.estimates()}
    assert set(estimates) == set(ESTIMATES)
    for where, reason in ESTIMATES.items():
        assert reason in estimates[where], where
    sourced = [p.where for p in every if not p.estimate]
    assert "instance_types.p6-b200.48xlarge.thresholds" in sourced, "B200 matmul floor rests on MAMF"
    assert "instance_types.p6-b200.48xlarge.thresholds.nccl.all_reduce.1node.busbw_gbps" in sourced


def test_a_container_type_says_how_it_divides_the_machine(tmp_path: Path) -> None:
    data = yaml.safe_load(HARDWARE_FILE.read_text())
    del data["instance_types"]["local"]["share"]
    path = tmp_path / "hardware.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationError, match="a container type needs a 'share' block"):
        read_hardware(path)
    data = yaml.safe_load(HARDWARE_FILE.read_text())
    data["instance_types"]["g5.xlarge"]["share"] = data["instance_types"]["local"]["share"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationError, match="only a container type may have one"):
        read_hardware(path)


def test_an_estimate_without_a_note_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(HARDWARE_FILE.read_text())
    data["instance_types"]["p5e.48xlarge"]["thresholds"]["nccl"][4]["note"] = ""  # the 2-node all_reduce
    path = tmp_path / "hardware.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationError, match="an estimate needs a note"):
        read_hardware(path)


def test_undeclared_source_is_rejected(tmp_path: Path) -> None:
    data = yaml.safe_load(HARDWARE_FILE.read_text())
    data["instance_types"]["g5.xlarge"]["network"]["source"] = ["a-blog-somewhere"]
    path = tmp_path / "hardware.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationError, match="g5.xlarge: source id 'a-blog-somewhere' is not declared"):
        read_hardware(path)


@pytest.mark.parametrize("name", AWS_TYPES)
def test_aws_figures_match_describe_instance_types(describe_instance_types: dict, name: str) -> None:
    it = HW[name]
    aws = describe_instance_types[name]
    net = aws["NetworkInfo"]
    assert it.vcpus == aws["VCpuInfo"]["DefaultVCpus"]
    assert it.memory_mib == aws["MemoryInfo"]["SizeInMiB"]
    assert it.network.network_cards == net["MaximumNetworkCards"]
    assert it.network.enis_max == net["MaximumNetworkInterfaces"]
    assert it.network.efa_interfaces == (net.get("EfaInfo") or {}).get("MaximumEfaInterfaces", 0)
    assert it.network.bandwidth_gbps == network_performance_gbps(net["NetworkPerformance"])
    gpus = (aws.get("GpuInfo") or {}).get("Gpus", [])
    if it.gpu is None:
        assert gpus == []
    else:
        (gpu,) = gpus
        assert (it.gpu.model, it.gpu.count, it.gpu.memory_mib) == (
            gpu["Name"],
            gpu["Count"],
            gpu["MemoryInfo"]["SizeInMiB"],
        )


def test_figures_the_issue_states() -> None:
    assert (HW["p5.48xlarge"].network.efa_interfaces, HW["p5.48xlarge"].network.network_cards) == (32, 32)
    assert (HW["p4d.24xlarge"].network.efa_interfaces, HW["p4d.24xlarge"].network.network_cards) == (4, 4)
    assert (HW["p5en.48xlarge"].network.efa_interfaces, HW["p5en.48xlarge"].network.network_cards) == (16, 16)
    assert (HW["p6-b200.48xlarge"].network.efa_interfaces, HW["p6-b200.48xlarge"].network.network_cards) == (
        8,
        8,
    )
    assert not HW["g5.xlarge"].has_efa
    assert HW["p5.48xlarge"].gpu and HW["p5.48xlarge"].gpu.memory_gib == 80.0
    assert HW["local"].container and HW["local"].gpu is None and HW["local"].provider == "local"


ARCH_OF = {
    "A100": "sm_80", "A10G": "sm_86", "H100": "sm_90", "H200": "sm_90", "B200": "sm_100",
    "B300": "sm_103", "L4": "sm_89", "L40S": "sm_89",
}  # fmt: skip
NVLINKS = {"A100": 12, "A10G": 0, "H100": 18, "H200": 18, "B200": 18, "B300": 18, "L4": 0, "L40S": 0}


@pytest.mark.parametrize("name", [n for n in HW.names() if HW[n].gpu])
def test_gpu_architecture_and_nvlink(name: str) -> None:
    gpu = HW[name].gpu
    assert gpu is not None
    assert gpu.architecture == ARCH_OF[gpu.model]
    assert gpu.nvlink_links_per_gpu == NVLINKS[gpu.model]
    assert gpu.nvswitch is (gpu.count == 8), "the 8-GPU HGX boards have NVSwitch; single-GPU types do not"


@pytest.mark.parametrize("name", HW.names())
def test_thresholds_consistent_with_the_hardware(name: str) -> None:
    it = HW[name]
    th = it.thresholds
    if it.gpu:
        assert th.matmul_tflops_min is not None and th.matmul_tflops_min < it.gpu.peak_bf16_tflops
        assert th.cpu_matmul_gflops_min is None
    else:
        assert th.matmul_tflops_min is None
    if it.container:
        assert th.cpu_matmul_gflops_min is not None
    if it.gpu is None and not it.container:
        assert th.nccl == [], "CPU-only types are not certified with NCCL"
    keys = [t.key for t in th.nccl]
    assert len(keys) == len(set(keys)), "one floor per collective and node count"
    for t in th.nccl:
        assert t.message_bytes >= 1 << 20, "floors on small messages measure latency, not bandwidth"
        if it.gpu and it.gpu.count == 1:
            pytest.fail("all_reduce busbw is 0 with one rank: no NCCL floor on a single-GPU type")
        if t.nodes >= 2:
            assert it.has_efa or it.network.infiniband_ports or it.container, (
                "a multi-node floor needs a fabric"
            )
        assert (t.backend == "gloo") is it.container, "gloo floors on container nodes, NCCL on GPUs"
    if it.gpu and it.gpu.count > 1:
        assert any(t.nodes == 1 and t.collective == "all_reduce" for t in th.nccl)
    if it.has_efa:
        assert any(t.nodes == 2 for t in th.nccl)


def test_threshold_keys() -> None:
    p5 = HW["p5.48xlarge"].thresholds
    assert Thresholds.threshold_key("nccl", "all_reduce", 2) == "nccl.all_reduce.2node.busbw_gbps"
    values = p5.values()
    assert {k: v for k, v in values.items() if "all_reduce" in k or "matmul" in k} == {
        "nccl.all_reduce.1node.busbw_gbps": 400.0,
        "nccl.all_reduce.1node.message_bytes": float(8 << 30),
        "nccl.all_reduce.2node.busbw_gbps": 205.0,  # Ring, judged at 16 GiB: 0.8 x 487.09 / 1.875
        "nccl.all_reduce.2node.message_bytes": float(16 << 30),
        "matmul.tflops_min": 640.0,
    }
    assert (
        values["nccl.all_gather.1node.busbw_gbps"] == 295.0
        and values["nccl.alltoall.2node.busbw_gbps"] == 23.0
    )
    merged = p5.with_overrides({"matmul.tflops_min": 600.0, "not.a.key": 1.0})
    assert merged["matmul.tflops_min"] == 600.0 and "not.a.key" not in merged
    local = HW.thresholds_for("local")
    assert local["matmul.cpu_gflops_min"] == 1.0 and local["matmul.median_gap_pct"] == 7
    assert local["gloo.all_reduce.1node.busbw_gbps"] == 0.01
    assert not any(key.startswith("nccl.") for key in local), "the CPU path has gloo floors, not NCCL ones"
    assert "checkpoint.write_ratio_min" in HW.threshold_keys("p5.48xlarge")
    with pytest.raises(ValueError):
        Thresholds.threshold_key("flops")


def test_lookup_api() -> None:
    assert HW.get("p5.48xlarg") is None
    with pytest.raises(KeyError):
        HW["p5.48xlarg"]
    assert "local" in HW and HW.names(provider="local") == ["local"]
    assert load_hardware() is HW  # cached


def test_fleet_rules_default_to_azures_gaps_and_local_has_its_own_estimate() -> None:
    p5 = HW.fleet_rules("p5.48xlarge")
    assert (p5.warn_gap_pct, p5.fail_gap_pct, p5.z_warn) == (3.5, 7, 3) and p5.source == ["azure-outlier"]
    local = HW.fleet_rules("local")
    assert local.estimate and local.warn_gap_pct < local.fail_gap_pct and "fleet_spread.py" in local.note
    assert HW.fleet_rules("no-such-type") == HW.fleet_defaults


def test_fleet_rules_with_warn_over_fail_are_refused(tmp_path: Path) -> None:
    data = yaml.safe_load(HARDWARE_FILE.read_text())
    data["fleet_defaults"]["warn_gap_pct"] = 9
    path = tmp_path / "hardware.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ValidationError, match="warn_gap_pct 9.0 must be under fail_gap_pct 7.0"):
        read_hardware(path)


def test_a_figure_given_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    # A second `vcpus:` for p5 must not silently replace the first (PyYAML keeps the last).
    text = HARDWARE_FILE.read_text()
    old = "  p5.48xlarge:\n    provider: aws\n    vcpus: 192\n    memory_mib: 2097152\n"
    assert text.count(old) == 1
    path = tmp_path / "hardware.yaml"
    path.write_text(text.replace(old, old + "    vcpus: 191\n"))
    line = next(n for n, t in enumerate(path.read_text().splitlines(), 1) if t == "    vcpus: 191")
    with pytest.raises(DuplicateKeyError) as err:
        read_hardware(path)
    assert str(err.value) == (
        f"{path}:{line}: instance_types.p5.48xlarge.vcpus: duplicate key 'vcpus' (first at line "
        f"{line - 2}); YAML would silently keep only the last one: remove one of them"
    )


# -- floors against what the hardware allows (issue 22) ------------------------------------------------

GPU_TYPES = [n for n in HW.names() if HW[n].gpu and HW[n].gpu.count > 1]


@pytest.mark.parametrize("name", GPU_TYPES)
def test_every_floor_is_under_what_the_hardware_allows_for_the_algorithm_used(name: str) -> None:
    """A ring's busbw across nodes is what each node's NICs carry per direction: <= the line rate L.
    The old 2-node floors (p5 390 of 400, p4d 60 of 50) came from tree runs and failed every pair."""
    it = HW[name]
    for t in it.thresholds.nccl:
        bound = busbw_bound(it, t.collective, t.nodes)
        if bound is None:
            assert t.nodes == 1 and t.collective == "all_reduce", (
                "only NVLS all_reduce in one node has no bound"
            )
            continue
        assert t.busbw_gbps_min <= bound, (
            f"{t.key}: {t.busbw_gbps_min} GB/s above the {bound:g} GB/s the hardware allows"
        )
        if t.nodes >= 2:
            # Within the efficiency public rings reach (0.96 at most, NVIDIA/nccl issue 812): a floor
            # above 0.8 x the bound could only pass on a perfect network.
            assert t.busbw_gbps_min <= 0.8 * bound, f"{t.key}: {t.busbw_gbps_min / bound:.2f} of the bound"


@pytest.mark.parametrize("name", GPU_TYPES)
def test_multi_node_floors_are_stated_for_the_algorithm_the_runner_forces(name: str) -> None:
    for t in HW[name].thresholds.nccl:
        if t.nodes == 1:
            assert t.algorithm is None, f"{t.key}: single-node runs use NCCL's own choice"
            continue
        assert t.nodes == 2, "the runner judges pairs; larger groups are recorded, not judged"
        expected = None if t.collective == "alltoall" else PAIR_ALGORITHM  # alltoall is point to point
        assert t.algorithm == expected, t.key
        if t.algorithm:
            assert "Ring" in t.note and "L = " in t.note or "bounded by L" in t.note, (
                f"{t.key}: state the arithmetic"
            )


@pytest.mark.parametrize("name", GPU_TYPES)
def test_every_collective_a_profile_runs_has_a_floor(name: str) -> None:
    """nccl-single-node runs all_reduce, all_gather, reduce_scatter and alltoall; nccl-multi-node the
    suite's collectives: none may end 'not judged' on a standard run."""
    from clusterforge.node.config import MULTI_NODE_COLLECTIVES
    from validators.config import DEFAULT_COLLECTIVES

    keys = {(t.collective, t.nodes) for t in HW[name].thresholds.nccl}
    for collective in DEFAULT_COLLECTIVES:
        assert (collective, 1) in keys, f"{name}: no single-node floor for {collective}"
    if HW[name].has_efa or HW[name].network.infiniband_ports:
        for collective in {c for suite in MULTI_NODE_COLLECTIVES.values() for c in suite}:
            assert (collective, 2) in keys, f"{name}: no 2-node floor for {collective}"


def test_bounds_arithmetic() -> None:
    p5, p4d = HW["p5.48xlarge"], HW["p4d.24xlarge"]
    assert line_rate_per_direction(p5) == 400 and line_rate_per_direction(p4d) == 50
    assert busbw_bound(p5, "all_reduce", 2) == 400
    assert busbw_bound(p5, "alltoall", 2) == pytest.approx(400 * 15 / 64)
    assert busbw_bound(p5, "all_gather", 1) == 450 and busbw_bound(p5, "all_reduce", 1) is None
