"""The live board at thousands of nodes: a line per stage and pool, the failing and slow nodes."""

from __future__ import annotations

import io

from rich.console import Console

from clusterforge.ansible.events import HostProgress
from clusterforge.pipeline.display import DETAIL_LIMIT, SHOWN, Board
from clusterforge.pipeline.scheduler import NodeProgress, Status

NODES = [f"gpu-{i:04d}" for i in range(1, 1001)] + [f"cpu-{i:02d}" for i in range(1, 25)]


def pool(name: str) -> str:
    return name.split("-")[0]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def walk(board: Board, clock: Clock, failing: set[str], lagging: set[str]) -> None:
    """Every node through configure and into certify, as the scheduler reports them."""
    progress = {n: NodeProgress(n, "configure") for n in NODES}
    for n, p in progress.items():
        p.status = Status.RUNNING
        board.stage(p)
        board.host(HostProgress(n, "nccl : Install the pinned NCCL", ok=3, changed=1))
    clock.now = 60.0
    for n, p in progress.items():
        if n in lagging:
            continue
        if n in failing:
            p.status, p.reason = Status.FAILED, "TASK [nccl : Install] failed: no such package"
        else:
            p.passed.append("configure")
            p.stage, p.status = "certify", Status.WAITING
        board.stage(p)
    clock.now = 200.0


def render(board: Board) -> str:
    out = io.StringIO()
    Console(file=out, width=160).print(board.view())
    return out.getvalue()


def test_a_thousand_nodes_are_a_line_per_stage_and_pool_and_the_nodes_that_need_a_look() -> None:
    clock = Clock()
    board = Board([(n, pool(n)) for n in NODES], Console(file=io.StringIO()), live=False, clock=clock)
    failing = {f"gpu-{i:04d}" for i in range(1, 16)}
    walk(board, clock, failing, lagging={"gpu-0500", "cpu-07"})
    text = render(board)
    assert len(text.splitlines()) < 40, text
    assert "configure" in text and "certify" in text
    row = next(line for line in text.splitlines() if "configure" in line and "gpu" in line)
    assert row.split("│")[3:7] == [
        "       0 ",
        "       1 ",
        "  984 ",
        "     15 ",
    ]  # waiting, running, done, failed
    assert text.count("FAILED ") == SHOWN and "… and 5 more failed" in text
    assert "SLOW gpu-0500 configure: 200 s, its pool's median 60 s" in text
    assert "SLOW cpu-07" in text
    assert "gpu-0002" not in text.replace("FAILED gpu-0002", "")  # no row per node


def test_a_large_fleet_logs_failures_and_counts_not_every_node() -> None:
    clock, out = Clock(), io.StringIO()
    board = Board([(n, pool(n)) for n in NODES], Console(file=out, width=200), live=False, clock=clock)
    with board:
        walk(board, clock, {"gpu-0003"}, lagging=set())
        board.note_many(NODES[:1000], "waiting for slurmd to register")
    lines = out.getvalue().splitlines()
    assert len(lines) < 30, lines
    assert any("gpu-0003 configure: failed" in line and "no such package" in line for line in lines)
    assert "gpu-[0001-1000] waiting for slurmd to register" in lines
    assert "configure gpu: 999 done, 1 failed" in lines and "configure cpu: 24 done" in lines
    assert lines[-2:] == ["certify gpu: 999 waiting", "certify cpu: 24 waiting"]  # counts when the board ends


def test_a_small_fleet_still_shows_every_node() -> None:
    out = io.StringIO()
    names = [f"node-{i:03d}" for i in range(1, DETAIL_LIMIT + 1)]
    board = Board([(n, "node") for n in names], Console(file=out, width=200), live=False)
    board.stage(NodeProgress("node-002", "configure", Status.RUNNING))
    board.note("node-002", "waiting for slurmd to register")
    assert "node-002 configure: running" in out.getvalue() and "node-002 waiting for slurmd" in out.getvalue()
