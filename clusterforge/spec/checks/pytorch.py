"""The torch build the GPU nodes get runs on the spec's driver and GPUs (compatibility.yaml torch)."""

from __future__ import annotations

from collections.abc import Iterable

from clusterforge.catalog.torch_builds import spec_torch
from clusterforge.spec.checks.base import Check, CheckContext, Issue, error, info


class TorchDriver(Check):
    id = "torch-driver"
    summary = "The torch build the validators install runs on the driver (its CUDA major) and carries every GPU's kernels"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        choice = spec_torch(ctx.spec, ctx.hardware, ctx.compat)
        if choice is None:
            return
        path = "software.torch" if ctx.spec.software.torch is not None else "software.driver.version"
        if choice.build is None:
            yield error(path, choice.problem)
            return
        b = choice.build
        yield info(
            "software.torch",
            f"GPU nodes install torch {b.pin} (CUDA {b.cuda}) from {b.index_url}"
            + ("" if b.pypi_default else "; PyPI's plain torch would not run on this driver or these GPUs"),
        )
