"""The torch build follows the driver (compatibility.yaml torch, catalog/torch_builds.py): a rule
with its sources, not a pin. PyPI's plain torch 2.13.0 is a CUDA 13.0 build (its METADATA requires
cuda-toolkit==13.0.3): it needs driver >= 580, and prod pins 570."""

from __future__ import annotations

import pytest

from clusterforge.catalog import load_compat, load_hardware
from clusterforge.catalog.torch_builds import min_driver, resolve_torch, runs_on
from clusterforge.catalog.versions import major

COMPAT = load_compat()
H100 = [("H100", "sm_90")]
B200 = [("B200", "sm_100")]
PROD_DRIVER = "570.133.20"


def test_on_the_prod_driver_the_cuda_12_build_from_its_own_index() -> None:
    choice = resolve_torch(COMPAT, None, None, PROD_DRIVER, H100 * 8)
    assert choice.build is not None, choice.problem
    assert (choice.build.pin, choice.build.index_url) == (
        "2.13.0+cu126",
        "https://download.pytorch.org/whl/cu126",
    )
    assert min_driver(COMPAT, choice.build) == "525.60.13"


def test_on_r580_the_stable_cuda_13_build_not_the_experimental_one() -> None:
    choice = resolve_torch(COMPAT, "2.13.0", None, "580.95.05", H100)
    assert choice.build is not None and choice.build.pin == "2.13.0+cu130" and choice.build.pypi_default


def test_a_cuda_13_pin_on_driver_570_is_refused_naming_both_and_the_fix() -> None:
    choice = resolve_torch(COMPAT, "2.13.0", "13.0", PROD_DRIVER, H100)
    assert choice.build is None
    assert choice.problem == (
        "torch 2.13.0+cu130 is built for CUDA 13.0, which needs driver >= 580 (CUDA 13.x minor version "
        "compatibility); driver 570.133.20 cannot run it. Fix: e.g. software.torch: {version: 2.13.0, "
        'cuda: "12.6"} (2.13.0+cu126 from https://download.pytorch.org/whl/cu126), or a driver of branch '
        "580 or newer"
    )


def test_b200_on_r570_has_no_torch_2_13_build_and_is_pointed_at_2_11_cu128() -> None:
    """torch 2.13's CUDA 12 build (cu126) carries no Blackwell kernels; its CUDA 13 builds need R580."""
    choice = resolve_torch(COMPAT, "2.13.0", None, PROD_DRIVER, B200)
    assert choice.build is None
    assert "no build of torch 2.13.0 runs on driver 570.133.20 with B200 (sm_100)" in choice.problem
    assert 'software.torch: {version: 2.11.0, cuda: "12.8"}' in choice.problem
    fit = resolve_torch(COMPAT, "2.11.0", None, PROD_DRIVER, B200)
    assert fit.build is not None and fit.build.pin == "2.11.0+cu128"


def test_a_pinned_build_without_the_gpus_kernels_is_refused() -> None:
    choice = resolve_torch(COMPAT, "2.13.0", "12.6", "580.95.05", B200 + H100)
    assert choice.build is None and choice.problem.startswith(
        "torch 2.13.0+cu126 has no kernels for B200 (sm_100)"
    )


def test_unknown_versions_and_variants_name_what_is_known() -> None:
    assert "no build of it in compatibility.yaml (known: 2.11.0, 2.12.0, 2.13.0)" in (
        resolve_torch(COMPAT, "2.99.0", None, PROD_DRIVER, H100).problem
    )
    assert resolve_torch(COMPAT, "2.13.0", "12.8", PROD_DRIVER, H100).problem == (
        "torch 2.13.0 has no CUDA 12.8 build (its builds: 12.6, 13.0, 13.2)"
    )


def test_every_build_is_consistent_with_the_rest_of_the_catalogue() -> None:
    archs = {it.gpu.architecture for it in load_hardware().instance_types.values() if it.gpu}
    for b in COMPAT.torch.builds:
        assert COMPAT.cuda_major_floor(b.cuda) is not None, (
            f"{b.pin}: CUDA {major(b.cuda)} has no driver floor"
        )
        assert b.index_url.endswith("/" + b.label), f"{b.pin}: PyTorch's index is named by the label"
        assert all(a.startswith("sm_") for a in b.architectures)
    for version in {b.torch for b in COMPAT.torch.builds}:
        builds = [b for b in COMPAT.torch.builds if b.torch == version]
        assert sum(b.pypi_default for b in builds) == 1, f"torch {version}: one build is PyPI's own"
    # Every GPU the hardware catalogue knows gets a build on the drivers the catalogue allows for it.
    for it in load_hardware().instance_types.values():
        if it.gpu is not None:
            floor = COMPAT.gpu(it.gpu.model)
            assert floor is not None
            assert resolve_torch(COMPAT, None, None, "580.95.05", [(it.gpu.model, it.gpu.architecture)]).build
    assert all(any(runs_on(b.architectures, a) for b in COMPAT.torch.builds) for a in archs)


@pytest.mark.parametrize("where", ["torch", "torch.builds.2.13.0+cu126", "torch.builds.2.11.0+cu128"])
def test_the_rule_is_sourced(where: str) -> None:
    rows = {p.where: p for p in COMPAT.provenance()}
    assert rows[where].source, where


def test_a_cubin_runs_on_its_own_major_at_an_equal_or_higher_minor_only() -> None:
    # CUDA's binary compatibility (LLVM libomptarget quotes the rule: "A cubin generated for a certain
    # compute capability is supported to run on any GPU with the same major revision and same or higher
    # minor revision"): the sm_100 kernels of the CUDA 13 builds run on a B300 (sm_103).
    assert runs_on(["sm_90", "sm_100"], "sm_103")
    assert runs_on(["sm_80"], "sm_86") and runs_on(["sm_90"], "sm_90")
    assert not runs_on(["sm_103"], "sm_100")  # a lower minor never runs a higher one's cubin
    assert not runs_on(["sm_90"], "sm_100")  # nor another major
    assert not runs_on(["sm_100a"], "sm_103")  # architecture-specific kernels: their own GPU only
