"""A result document made by a whole benchmark against the fake head (for the page's tests)."""

from __future__ import annotations

import copy
import functools
import os
import tempfile
from pathlib import Path
from typing import Any


@functools.cache
def _result() -> dict[str, Any]:
    from clusterforge.journal import Journal
    from tests.benchmark.fake_cluster import Behaviour, FakeHead
    from tests.benchmark.test_run import NODES, local_spec, run
    from tests.pipeline.fakes import FakeProvider

    old = os.environ.get("CLUSTERFORGE_STATE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CLUSTERFORGE_STATE_DIR"] = str(Path(tmp) / "state")
        try:
            spec = local_spec()
            provider = FakeProvider()
            provider.create(spec)
            journal = Journal(spec.stack)
            for n in NODES:
                journal.mark_done(n, "certified", verdict="pass")
            head = FakeHead({n: "idle none" for n in NODES})
            head.behaviour.update(
                {n: Behaviour(comm=0.05) for n in NODES}
            )  # a visible exposed part at 2+ nodes
            out, _ = run(spec, provider, head, workloads=("train", "infer", "data"))
        finally:
            if old is None:
                os.environ.pop("CLUSTERFORGE_STATE_DIR", None)
            else:
                os.environ["CLUSTERFORGE_STATE_DIR"] = old
    assert out.result is not None
    return out.result


def sample_result() -> dict[str, Any]:
    return copy.deepcopy(_result())
