"""`invoke benchmark` end to end against a fake head node and provider (clusterforge/benchmark/run.py):
plan, sizes, jobs one at a time, analysis, stored result and page, gates, and faults that change
the verdict the right way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterforge.benchmark.run import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, Seams, benchmark
from clusterforge.benchmark.runner import Timing
from clusterforge.journal import Journal
from clusterforge.spec.loader import load_spec
from tests.benchmark.fake_cluster import Behaviour, FakeHead
from tests.pipeline.fakes import FakeProvider

ROOT = Path(__file__).resolve().parents[2]
NODES = ("node-001", "node-002", "node-003", "node-004")


def local_spec(**bench: object):
    spec, _ = load_spec(ROOT / "stacks" / "local.yaml")
    if bench:
        spec = spec.model_validate({**spec.model_dump(mode="json"), "benchmark": bench})
    return spec


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    spec = local_spec()
    provider = FakeProvider()
    provider.create(spec)
    journal = Journal(spec.stack)
    for n in NODES:
        journal.mark_done(n, "certified", verdict="pass")
    head = FakeHead({n: "idle none" for n in NODES})
    return spec, provider, head


def run(spec, provider, head, workloads=("train",), counts=(1, 2, 4), run_id="20261202T100000Z"):
    notes: list[str] = []
    seams = Seams(provider=provider, runner=head.runner, timing=Timing(poll_s=0), run_id=run_id)
    out = benchmark(spec, list(workloads), list(counts), note=notes.append, seams=seams)
    return out, notes


def test_all_workloads_complete_with_figures_per_node_count(cluster) -> None:
    spec, provider, head = cluster
    out, notes = run(spec, provider, head, workloads=("train", "infer", "data"))
    assert out.code == EXIT_OK, notes
    doc = out.result
    assert doc is not None
    points = {p["nodes"]: p for p in doc["train"]["points"]}
    assert sorted(points) == [1, 2, 4]
    for p in points.values():
        assert p["tokens_per_s"] > 0 and set(p["breakdown"]) >= {
            "compute",
            "exposed_comm",
            "data_wait",
            "optimizer",
        }
    assert points[1]["efficiency"] == 1.0 and 0.9 < points[4]["efficiency"] < 1.0
    assert doc["train"]["limit"]["part"] == "compute"
    assert doc["infer"]["points"] and doc["data"]["fed"] is True
    assert set(doc["telemetry"]) == {"train-1n", "train-2n", "train-4n", "infer-1n", "data-1n"}
    assert doc["software"]["node-001"]["torch"] == "2.13.0+cpu"
    # one sbatch per run plus the dataset, never two runs at once
    prefix = "clusterforge-bench-20261202T100000Z-"
    names = [c[c.index("-J") + 1] for c in head.calls if c[0] == "sbatch"]
    assert [n.removeprefix(prefix) for n in names] == [
        "prepare",
        "train-1n",
        "train-2n",
        "train-4n",
        "infer-1n",
        "data-1n",
    ]
    stored = Path(out.paths["result"])
    assert json.loads(stored.read_text())["run_id"] == "20261202T100000Z"
    assert (stored.parent / "report.html").is_file()
    assert (stored.parent / "raw" / "train-2n" / "rank-1.jsonl").is_file()


def test_a_second_run_reuses_the_dataset_and_compares_with_the_first(cluster) -> None:
    spec, provider, head = cluster
    run(spec, provider, head, counts=(1, 2), run_id="20261202T100000Z")
    head.behaviour.update(
        {"node-001": Behaviour(comm=0.3), "node-002": Behaviour(comm=0.3)}
    )  # slower all-reduce
    out, _ = run(spec, provider, head, counts=(1, 2), run_id="20261202T110000Z")
    assert sum(1 for c in head.calls if c[0] == "sbatch" and "prepare" in c[c.index("-J") + 1]) == 1
    doc = out.result
    assert doc is not None and doc["previous_run"] == "20261202T100000Z"
    (reg,) = doc["regressions"]
    assert reg["key"] == "train 2 node(s) tokens/s" and "in run 20261202T100000Z" in reg["line"]
    assert out.code == EXIT_OK  # named, not gating: fail_on_regression is off


def test_a_slow_link_names_communication_and_fails_the_efficiency_gate(cluster) -> None:
    spec, provider, head = cluster
    head.behaviour["node-002"] = Behaviour(comm=0.4)
    head.behaviour["node-001"] = Behaviour(comm=0.4)
    out, _ = run(local_spec(min_scaling_efficiency=0.8), provider, head, counts=(1, 2))
    doc = out.result
    assert doc is not None and out.code == EXIT_FAILED
    limit = doc["train"]["limit"]
    assert limit["part"] == "exposed_comm" and limit["rank"] is None
    assert limit["line"].startswith("at 2 nodes, exposed communication is ")
    (gate,) = doc["gates"]
    assert gate["name"] == "min_scaling_efficiency" and not gate["passed"]


def test_a_cpu_capped_node_is_the_slow_rank(cluster) -> None:
    spec, provider, head = cluster
    head.behaviour["node-002"] = Behaviour(compute=3.0)
    out, _ = run(spec, provider, head, counts=(1, 2))
    assert out.result is not None
    limit = out.result["train"]["limit"]
    assert (limit["part"], limit["rank"], limit["node"]) == ("compute", 1, "node-002")


def test_a_slow_storage_path_shows_as_data_loader_wait(cluster) -> None:
    spec, provider, head = cluster
    head.behaviour["node-002"] = Behaviour(data=0.5)
    out, _ = run(spec, provider, head, counts=(1, 2))
    assert out.result is not None
    limit = out.result["train"]["limit"]
    assert (limit["part"], limit["node"]) == ("data_wait", "node-002")


def test_a_hung_rank_is_named_and_the_other_runs_go_on(cluster) -> None:
    spec, provider, head = cluster
    head.behaviour["node-003"] = Behaviour(hang_after=5)
    out, notes = run(spec, provider, head, workloads=("train", "infer"), counts=(1, 2, 4))
    assert out.code == EXIT_FAILED
    doc = out.result
    assert doc is not None
    assert [p["nodes"] for p in doc["train"]["points"]] == [1, 2]
    (line,) = doc["failures"]
    assert line.startswith(
        "train-4n: rank 2 on node-003 hung: stopped at the job's deadline after step 5 (output kept in "
    )
    assert doc["infer"]["points"], "the inference run after the failed one still ran"
    assert {r["key"]: r["state"] for r in doc["runs"]}["train-4n"] == "failed"


def test_too_few_certified_nodes_skips_counts_and_says_why(cluster) -> None:
    spec, provider, head = cluster
    head.states["node-004"] = "drained clusterforge: gloo-allreduce: 0.01 GB/s"
    Journal(spec.stack).annotate("node-003", certifying="run-7")
    out, notes = run(spec, provider, head, counts=(1, 2, 4))
    assert out.code == EXIT_OK
    assert any(n.startswith("skipped: train at 4 node(s): needs 4 certified idle nodes; 2 are (node-001, node-002)")
               for n in notes), notes  # fmt: skip
    assert any(
        "node-003 under certification" in n and "node-004 drained (clusterforge: gloo-allreduce" in n
        for n in notes
    )
    for call in head.calls:
        if call[0] == "sbatch":
            assert not {"node-003", "node-004"} & set(call[call.index("-w") + 1].split(","))


def test_a_size_that_cannot_fit_is_refused_before_any_job(cluster) -> None:
    spec, provider, head = cluster
    big = local_spec(train={"d_model": 4096, "heads": 32, "layers": 8, "micro_batch": 64})
    out, notes = run(big, provider, head)
    assert out.code == EXIT_REFUSED
    assert notes[-1].startswith("refused: benchmark.train: ") and "would" in notes[-1]
    assert not [c for c in head.calls if c[0] == "sbatch"]


def test_no_head_node_or_no_shared_storage_is_refused(cluster) -> None:
    spec, provider, head = cluster
    bare = spec.model_validate({**spec.model_dump(mode="json"), "storage": {}})
    out, notes = run(bare, provider, head)
    assert out.code == EXIT_REFUSED and "has no shared storage" in notes[-1]
    provider.states["head-001"] = "exited"
    out, notes = run(spec, provider, head)
    assert out.code == EXIT_REFUSED and "no running head node" in notes[-1]


def test_a_job_that_cannot_start_is_cancelled_with_slurms_reason(
    cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, provider, head = cluster
    clock = iter(range(0, 100000, 30))
    seams_timing = Timing(poll_s=0, clock=lambda: float(next(clock)), sleep=lambda _: None)
    real = head._sbatch

    def drain_then_submit(argv: list[str]):
        if "train-2n" in argv[argv.index("-J") + 1]:
            head.states["node-002"] = "drained someone: fan"
        return real(argv)

    head._sbatch = drain_then_submit  # type: ignore[method-assign]
    seams = Seams(provider=provider, runner=head.runner, timing=seams_timing, run_id="20261202T120000Z")
    notes: list[str] = []
    out = benchmark(spec, ["train"], [1, 2], note=notes.append, seams=seams)
    assert out.result is not None and out.code == EXIT_FAILED
    assert any(
        "did not start within 120 s (squeue: PENDING ReqNodeNotAvail,_UnavailableNodes:node-002)" in n
        for n in notes
    )
    assert [c for c in head.calls if c[0] == "scancel"]
