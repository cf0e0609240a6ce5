"""The benchmark jobs' output, parsed once into typed records (the boundary: nothing else reads
the raw JSON lines). Malformed lines are skipped and counted, never raised: a rank that died
mid-line still has its earlier steps."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

STEP_PARTS = ("data_wait", "forward", "backward", "exposed_comm", "optimizer", "checkpoint")


@dataclass(frozen=True)
class Step:
    """One training step of one rank, seconds (see validators/workloads/benchmark/train.py)."""

    i: int
    warmup: bool
    data_wait: float
    forward: float
    backward: float
    exposed_comm: float
    optimizer: float
    checkpoint: float
    step: float
    comm: float | None = None  # every all-reduce from start to end, hidden or not (gloo only)

    @property
    def compute(self) -> float:
        """Forward and backward without the wait for gradients: the backward up to the last bucket."""
        return self.forward + max(0.0, self.backward - self.exposed_comm)

    @property
    def work(self) -> float:
        """What this rank did before it could join the step's last all-reduce."""
        return self.data_wait + self.compute


@dataclass
class RankRun:
    rank: int
    node: str
    start: dict[str, Any] = field(default_factory=dict)  # the rank's "start" line (device, dtype, params...)
    steps: list[Step] = field(default_factory=list)
    ended: bool = False
    skipped_lines: int = 0

    @property
    def measured(self) -> list[Step]:
        return [s for s in self.steps if not s.warmup]

    @property
    def last_step(self) -> int:
        return self.steps[-1].i if self.steps else -1


@dataclass(frozen=True)
class Process:
    """A process the node driver ran, as its node-<name>.json says."""

    name: str
    rc: int | None
    timed_out: bool
    seconds: float
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out


@dataclass
class NodeRun:
    node: str
    found: bool  # its node-<name>.json was there
    error: str = ""
    software: dict[str, str] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)


@dataclass(frozen=True)
class InferBatch:
    local_rank: int
    batch: int
    seconds: float
    ttft: float
    new_tokens: int


@dataclass(frozen=True)
class LoaderRow:
    workers: int
    samples_per_s: float
    mb_per_s: float
    seconds: float
    direct: bool = True


@dataclass(frozen=True)
class Sample:
    t: float
    cpu_pct: float | None = None
    cpu_cores: float | None = None
    mem_bytes: float | None = None
    net_rx_bps: float | None = None
    net_tx_bps: float | None = None
    power_w: float | None = None
    gpu_util_pct: float | None = None  # mean over the node's GPUs
    gpu_mem_mib: float | None = None  # sum over the node's GPUs


@dataclass
class Telemetry:
    node: str
    meta: dict[str, Any] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)


def json_lines(text: str) -> tuple[list[dict[str, Any]], int]:
    """Objects of a JSON-lines text, and how many lines were not one."""
    rows, bad = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(obj, dict):
            rows.append(obj)
        else:
            bad += 1
    return rows, bad


def _num(value: Any, default: float = 0.0) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def parse_rank(text: str, rank: int, node: str) -> RankRun:
    rows, bad = json_lines(text)
    run = RankRun(rank, node, skipped_lines=bad)
    for row in rows:
        kind = row.get("kind")
        if kind == "start":
            run.start = row
        elif kind == "end":
            run.ended = True
        elif kind == "step" and isinstance(row.get("i"), int):
            comm = row.get("comm")
            run.steps.append(
                Step(
                    i=row["i"],
                    warmup=bool(row.get("warmup")),
                    **{part: _num(row.get(part)) for part in STEP_PARTS},
                    step=_num(row.get("step")),
                    comm=_num(comm) if isinstance(comm, int | float) else None,
                )
            )
        else:
            run.skipped_lines += 1
    return run


def parse_node(text: str | None, node: str) -> NodeRun:
    if text is None:
        return NodeRun(node, found=False)
    try:
        data = json.loads(text)
    except ValueError:
        return NodeRun(node, found=False, error="node-<name>.json is not valid JSON")
    if not isinstance(data, dict):
        return NodeRun(node, found=False, error="node-<name>.json is not a JSON object")
    procs = []
    for p in data.get("processes") or []:
        if isinstance(p, dict):
            rc = p.get("rc")
            procs.append(
                Process(
                    str(p.get("name", "")),
                    rc if isinstance(rc, int) else None,
                    bool(p.get("timed_out")),
                    _num(p.get("seconds")),
                    str(p.get("stderr_tail") or ""),
                )
            )
    raw = data.get("software")
    software: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return NodeRun(
        node, True, str(data.get("error") or ""), {str(k): str(v) for k, v in software.items()}, procs
    )


def parse_infer(text: str) -> list[InferBatch]:
    rows, _ = json_lines(text)
    return [
        InferBatch(
            int(_num(r.get("local_rank"))),
            int(_num(r.get("batch"))),
            _num(r.get("seconds")),
            _num(r.get("ttft")),
            int(_num(r.get("new_tokens"))),
        )  # fmt: skip
        for r in rows
        if r.get("kind") == "batch" and _num(r.get("seconds")) > 0 and _num(r.get("batch")) > 0
    ]


def parse_loader(text: str) -> list[LoaderRow]:
    rows, _ = json_lines(text)
    return [
        LoaderRow(
            int(_num(r.get("workers"))),
            _num(r.get("samples_per_s")),
            _num(r.get("mb_per_s")),
            _num(r.get("seconds")),
            bool(r.get("direct", True)),
        )  # fmt: skip
        for r in rows
        if r.get("kind") == "loader" and _num(r.get("workers")) > 0
    ]


def _opt(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def parse_telemetry(text: str, node: str) -> Telemetry:
    rows, _ = json_lines(text)
    tel = Telemetry(node)
    for r in rows:
        if r.get("kind") == "meta":
            tel.meta = r
        elif r.get("kind") == "sample" and _opt(r.get("t")) is not None:
            gpus = [g for g in r.get("gpus") or [] if isinstance(g, dict)]
            utils = [u for g in gpus if (u := _opt(g.get("util_pct"))) is not None]
            mems = [m for g in gpus if (m := _opt(g.get("mem_mib"))) is not None]
            tel.samples.append(
                Sample(
                    t=float(r["t"]),
                    cpu_pct=_opt(r.get("cpu_pct")),
                    cpu_cores=_opt(r.get("cpu_cores")),
                    mem_bytes=_opt(r.get("mem_bytes")),
                    net_rx_bps=_opt(r.get("net_rx_bps")),
                    net_tx_bps=_opt(r.get("net_tx_bps")),
                    power_w=_opt(r.get("power_w")),
                    gpu_util_pct=sum(utils) / len(utils) if utils else None,
                    gpu_mem_mib=sum(mems) if mems else None,
                )
            )
    return tel
