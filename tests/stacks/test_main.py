"""`stacks/__main__.py` as Pulumi runs it: the stack name picks the spec, and it builds that cluster."""

from __future__ import annotations

import runpy

import pulumi
import pytest

from tests.stacks.harness import MOCKS, STACKS, settle


@pulumi.runtime.test
def test_main_builds_the_spec_named_by_the_stack(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(pulumi, "get_stack", lambda: "dev")

    async def check():
        MOCKS.reset()
        env = runpy.run_path(str(STACKS / "__main__.py"), run_name="__main__")
        c = env["cluster"]
        resources = await settle([c.network, c.storage, c.iam, c.head, *c.pools])
        names = sorted(r.name for r in resources if r.type == "aws:ec2/instance:Instance")
        assert names == ["gpu-001", "gpu-002", "head-001"]
        assert all(r.inputs["tags"]["clusterforge:stack"] == "dev" for r in resources if "tags" in r.inputs)

    return check()
