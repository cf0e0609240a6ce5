"""A failed or hung job names its rank and node and keeps its output (clusterforge/benchmark/outcome.py)."""

from __future__ import annotations

import json

from clusterforge.benchmark.outcome import JobOutput, parse_job

FOLDER = "/shared/.clusterforge/benchmark/r/train-2n"


def node_file(node: str, procs: list[dict]) -> str:
    return json.dumps(
        {"kind": "node", "node": node, "software": {"torch": "2.13.0"}, "processes": procs, "error": ""}
    )


def steps(n: int) -> str:
    return "\n".join(json.dumps({"kind": "step", "i": i, "warmup": i < 2, "step": 0.1, "forward": 0.05, "backward": 0.05})
                     for i in range(n))  # fmt: skip


def test_a_hung_rank_is_named_with_its_node_and_last_step_and_comes_first() -> None:
    files = {
        "node-node-001.json": node_file("node-001", [{"name": "rank-0", "rc": 1, "timed_out": False,
                                        "stderr_tail": "RuntimeError: [gloo] Connection closed by peer"}]),
        "node-node-002.json": node_file("node-002", [{"name": "rank-1", "rc": -15, "timed_out": True}]),
        "rank-0.jsonl": steps(8),
        "rank-1.jsonl": steps(5),
    }  # fmt: skip
    parsed = parse_job(
        JobOutput("train-2n", "train", ("node-001", "node-002"), FOLDER, "done", "7", files), 1, 10
    )
    first, second = parsed.failures
    assert (
        first
        == f"train-2n: rank 1 on node-002 hung: stopped at the job's deadline after step 4 (output kept in {FOLDER})"
    )
    assert second.startswith(
        "train-2n: rank 0 on node-001 exited 1 at step 7: RuntimeError: [gloo] Connection closed"
    )


def test_a_node_without_a_record_is_named() -> None:
    files = {
        "node-node-001.json": node_file("node-001", [{"name": "rank-0", "rc": 0}]),
        "rank-0.jsonl": steps(12),
    }
    parsed = parse_job(
        JobOutput("train-2n", "train", ("node-001", "node-002"), FOLDER, "done", "7", files), 1, 10
    )
    assert parsed.failures == [
        f"train-2n: node-002 gave no result (the job did not run there, or the node died) (output kept in {FOLDER})"
    ]


def test_a_job_that_never_started_says_why() -> None:
    out = JobOutput(
        "infer-1n",
        "infer",
        ("node-001",),
        FOLDER,
        "cancelled: did not start within 120 s (squeue: PENDING ReqNodeNotAvail)",
        "9",
    )
    (line,) = parse_job(out, 1, 10).failures
    assert "infer-1n: node-001 gave no result" in line
    assert parse_job(
        JobOutput("x", "data", ("n",), FOLDER, "not submitted: sbatch exited 1: bad"), 1, 1
    ).failures == ["x: not submitted: sbatch exited 1: bad"]


def test_a_rank_that_stopped_early_without_an_error_is_a_failure_too() -> None:
    files = {
        "node-node-001.json": node_file("node-001", [{"name": "rank-0", "rc": 0}]),
        "rank-0.jsonl": steps(6),
    }
    (line,) = parse_job(
        JobOutput("train-1n", "train", ("node-001",), FOLDER, "done", "3", files), 1, 10
    ).failures
    assert "rank 0 on node-001 recorded 4 of 10 measured steps" in line


def test_a_complete_run_has_no_failures_and_its_ranks_parse() -> None:
    files = {
        "node-node-001.json": node_file("node-001", [{"name": "rank-0", "rc": 0}]),
        "rank-0.jsonl": steps(12) + "\n{broken",
    }
    parsed = parse_job(JobOutput("train-1n", "train", ("node-001",), FOLDER, "done", "3", files), 1, 10)
    assert (
        parsed.failures == [] and len(parsed.ranks[0].measured) == 10 and parsed.ranks[0].skipped_lines == 1
    )
    assert parsed.nodes["node-001"].software == {"torch": "2.13.0"}
