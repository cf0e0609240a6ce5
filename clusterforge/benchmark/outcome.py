"""One job's output turned into figures or into named failures (pure).

``JobOutput`` is what the runner read back from a job's folder. A job that did not give every
rank's figures is a failed run, and each failure line names the rank and node, what happened
(exit status and its last error line, stopped at the deadline after step k, no result from the
node at all) and where the output is kept; the other runs go on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterforge.benchmark.records import (
    NodeRun,
    RankRun,
    Telemetry,
    parse_node,
    parse_rank,
    parse_telemetry,
)

# Errors a rank reports because a peer went away: a consequence, not the cause.
PEER_ERRORS = re.compile(
    r"connection (reset|closed)|broken pipe|peer|socket timeout|timed out|gloo|nccl", re.I
)


@dataclass
class JobOutput:
    key: str
    workload: str
    nodes: tuple[str, ...]
    folder: str  # on shared storage
    state: str  # "done" | "cancelled at the ... deadline" | "not submitted: ..." | "pending: ..."
    job_id: str = ""
    files: dict[str, str] = field(default_factory=dict)  # file name -> text
    seconds: float = 0.0

    @property
    def submitted(self) -> bool:
        return not self.state.startswith("not submitted")


@dataclass
class Parsed:
    nodes: dict[str, NodeRun]
    ranks: list[RankRun]
    telemetry: dict[str, Telemetry]
    failures: list[str]


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def parse_job(job: JobOutput, ranks_per_node: int, steps_expected: int) -> Parsed:
    nodes = {n: parse_node(job.files.get(f"node-{n}.json"), n) for n in job.nodes}
    telemetry = {
        n: parse_telemetry(job.files[f"telemetry-{n}.jsonl"], n)
        for n in job.nodes
        if f"telemetry-{n}.jsonl" in job.files
    }
    ranks: list[RankRun] = []
    if job.workload == "train":
        for index, node in enumerate(job.nodes):
            for local in range(ranks_per_node):
                rank = index * ranks_per_node + local
                ranks.append(parse_rank(job.files.get(f"rank-{rank}.jsonl", ""), rank, node))
    return Parsed(nodes, ranks, telemetry, failures(job, nodes, ranks, steps_expected))


def failures(
    job: JobOutput, nodes: dict[str, NodeRun], ranks: list[RankRun], steps_expected: int
) -> list[str]:
    where = f"(output kept in {job.folder})"
    if not job.submitted:
        return [f"{job.key}: {job.state}"]
    out: list[str] = []
    by_node_rank = {(r.node, f"rank-{r.rank}"): r for r in ranks}
    # (how far it got, kind, line): the earliest stop is the likeliest cause; at the same point a
    # node that gave nothing comes before a rank that hung, which comes before one that exited.
    causes: list[tuple[int, int, str]] = []
    for name in job.nodes:
        node = nodes[name]
        if not node.found:
            extra = f": {node.error}" if node.error else ""
            causes.append(
                (
                    -1,
                    0,
                    f"{job.key}: {name} gave no result{extra} (the job did not run there, or the node died) {where}",
                )
            )
            continue
        if node.error:
            causes.append((-1, 0, f"{job.key}: {name}: {node.error} {where}"))
        for proc in node.processes:
            rank = by_node_rank.get((name, proc.name))
            got = rank.last_step if rank is not None else -1
            who = f"{proc.name.replace('-', ' ')} on {name}"
            if proc.timed_out:
                step = f" after step {got}" if got >= 0 else " before its first step"
                causes.append((got, 1, f"{job.key}: {who} hung: stopped at the job's deadline{step} {where}"))
            elif proc.rc != 0:
                err = last_line(proc.stderr_tail) or "no error output"
                peer = bool(PEER_ERRORS.search(proc.stderr_tail))
                causes.append(
                    (
                        got + (1 if peer else 0),
                        2,
                        f"{job.key}: {who} exited {proc.rc} at step {got}: {err} {where}",
                    )
                )
    if causes:
        causes.sort(key=lambda c: (c[0], c[1]))
        out.extend(line for _, _, line in causes)
    elif job.state != "done":
        out.append(f"{job.key}: job {job.job_id or '?'} {job.state} {where}")
    if not out and job.workload == "train":
        short = [r for r in ranks if len(r.measured) < steps_expected]
        for r in short:
            out.append(
                f"{job.key}: rank {r.rank} on {r.node} recorded {len(r.measured)} of {steps_expected} measured steps {where}"
            )
    return out
