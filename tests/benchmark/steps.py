"""Synthetic rank records for the breakdown and attribution tests: exact figures, so every
sum and ratio can be checked by hand."""

from __future__ import annotations

from clusterforge.benchmark.records import RankRun, Step


def step(
    i: int,
    *,
    data: float = 0.0,
    fwd: float = 0.1,
    bwd: float = 0.2,
    exposed: float = 0.0,
    opt: float = 0.01,
    ckpt: float = 0.0,
    overhead: float = 0.0,
    comm: float | None = None,
    warmup: bool = False,
) -> Step:
    """A step whose backward computes for ``bwd`` then waits ``exposed`` for its all-reduce (the
    workload records both as its ``backward``), and whose wall time is the sum plus ``overhead``."""
    wall = data + fwd + bwd + exposed + opt + ckpt + overhead
    return Step(i, warmup, data, fwd, bwd + exposed, exposed, opt, ckpt, wall, comm)


def rank(r: int, node: str, steps: list[Step]) -> RankRun:
    return RankRun(r, node, {"kind": "start"}, steps, ended=True)
