"""torch-driver: the spec check that refuses a torch build the driver cannot run, and the prod
inventory that installs one it can (issue 22: a 570 driver and PyPI's CUDA 13 torch; prod has since moved to
580, so the 570 cases edit prod back to it)."""

from __future__ import annotations

from pathlib import Path

from clusterforge.catalog import load_compat, load_hardware
from clusterforge.catalog.torch_builds import min_driver
from clusterforge.catalog.versions import at_least
from clusterforge.inventory import validators_vars
from clusterforge.node.config import render_node_config
from clusterforge.providers.base import Node
from clusterforge.spec.checks import check_file
from clusterforge.spec.loader import load_spec
from tests.roles.test_role_vars import render
from tests.spec.test_checks import STACKS, line_of, only, variant

# prod's driver line moved back to the 570 branch the review found (and its fabric manager with it)
ON_570 = (
    ('driver: {branch: "580", version: 580.105.08,', 'driver: {branch: "570", version: 570.133.20,'),
    ("fabric_manager: 580.105.08", "fabric_manager: 570.133.20"),
)


def test_prod_passes_and_says_which_build_its_gpu_nodes_get() -> None:
    report = check_file(STACKS / "prod.yaml")
    assert not [f for f in report.findings if f.level == "error"], [f.render() for f in report.findings]
    note = only(report.findings, "torch-driver", "software.torch")
    assert note.level == "info" and "torch 2.13.0+cu130 (CUDA 13.0)" in note.message


def test_a_cuda_13_torch_pinned_on_driver_570_is_refused_with_both_versions(tmp_path: Path) -> None:
    spec = variant(
        tmp_path,
        "prod",
        *ON_570,
        ("  dcgm: 4.4.1\n", '  torch: {version: 2.13.0, cuda: "13.0"}\n  dcgm: 4.4.1\n'),
    )
    finding = only(check_file(spec).findings, "torch-driver", "software.torch")
    assert finding.level == "error"
    assert finding.line == line_of(spec, "torch: {version")
    for part in ("torch 2.13.0+cu130", "CUDA 13.0", "needs driver >= 580", "driver 570.133.20 cannot run it"):
        assert part in finding.message
    assert 'Fix: e.g. software.torch: {version: 2.13.0, cuda: "12.6"}' in finding.message


def test_a_b200_pool_on_driver_570_without_a_pin_is_refused_on_the_driver(tmp_path: Path) -> None:
    spec = variant(
        tmp_path, "prod", *ON_570, ("instance_type: p5.48xlarge", "instance_type: p6-b200.48xlarge")
    )
    finding = only(check_file(spec).findings, "torch-driver", "software.driver.version")
    assert finding.level == "error" and "B200 (sm_100)" in finding.message
    assert 'software.torch: {version: 2.11.0, cuda: "12.8"}' in finding.message


def prod_nodes() -> list[Node]:
    head = Node("head-001", "10.0.32.10", "head", "head", "m7i.4xlarge", {"ansible_host": "i-0"})
    gpus = [
        Node(f"gpu-{i:03d}", f"10.0.0.{10 + i}", "gpu", "gpu", "p5.48xlarge", {"ansible_host": f"i-{i}"})
        for i in range(1, 17)
    ]
    return [head, *gpus]


def test_the_prod_inventory_installs_a_torch_build_the_prod_driver_runs() -> None:
    """Before: validators_runtime_torch_index_url was never rendered for AWS: pip installed PyPI's
    torch 2.13.0, a CUDA 13.0 build, on driver 570.133.20."""
    spec, _ = load_spec(STACKS / "prod.yaml")
    out = validators_vars(spec, prod_nodes(), load_hardware())
    assert out["validators_runtime_torch_version"] == "2.13.0+cu130"  # prod's driver 580 runs CUDA 13
    assert out["validators_runtime_torch_index_url"] == "https://download.pytorch.org/whl/cu130"
    build = next(b for b in load_compat().torch.builds if b.pin == out["validators_runtime_torch_version"])
    assert at_least(spec.software.driver.version, min_driver(load_compat(), build))
    # The role installs exactly that build, from that index only (no fallback to PyPI's other build).
    argv = render(
        "validators_runtime",
        None,
        "{{ ['pip', 'torch==' ~ validators_runtime_torch_version] + (['--index-url', "
        "validators_runtime_torch_index_url] if validators_runtime_torch_index_url else []) }}",
        **out,
    )
    assert argv == ["pip", "torch==2.13.0+cu130", "--index-url", "https://download.pytorch.org/whl/cu130"]
    # NODE.json pins the same build, so python-runtime fails a node that got another one.
    config = render_node_config(spec, prod_nodes()[1])
    assert config["software"]["torch"] == "2.13.0+cu130"


def test_the_local_stack_keeps_its_shared_cpu_torch() -> None:
    spec, _ = load_spec(STACKS / "local.yaml")
    nodes = [Node("node-001", "10.89.0.11", "node", "gpu", "local", {"ansible_connection": "podman"})]
    out = validators_vars(spec, nodes, load_hardware())
    assert out == {"validators_runtime_torch": "shared"}
