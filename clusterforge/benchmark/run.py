"""`invoke benchmark`: plan on certified idle nodes, run each job in turn, analyse, store, report.

1. Nodes: the provider's running compute nodes, the journal's verdicts and Slurm's states (one
   ``sinfo`` through the head node); the plan takes certified idle nodes only and says which node
   counts are skipped and why.
2. Sizes for the node type; a size that cannot fit a device is refused here, before any job.
3. Every job.json is written to shared storage in one command; the dataset is written once (a
   ``prepare`` job) unless a complete one of that shape is there.
4. Jobs one at a time (training at each node count, then inference, then the loader sweep);
   each job's folder is read back and kept under the run's ``raw/``. A failed or hung job is
   named (rank and node) and the next runs go on.
5. Analysis (pure modules), comparison with the last comparable run, the spec's gates.
6. ``result.json`` and ``report.html`` under ``<state>/<stack>/benchmarks/<run id>/``.
Exit: 0 all ran and every gate passed; 1 a run failed, a gate failed or nothing could run;
2 refused before any job (bad option, too-large size, no shared storage, no head node).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from clusterforge.benchmark import attribution, breakdown, compare, delivery, inference, result
from clusterforge.benchmark.jobs import Address, JobSet, job_config
from clusterforge.benchmark.outcome import JobOutput, parse_job
from clusterforge.benchmark.plan import Candidate, Plan, PlanError, Run, make_plan
from clusterforge.benchmark.records import parse_infer, parse_loader
from clusterforge.benchmark.runner import HeadRun, Timing, dataset_ready, run_job, write_files
from clusterforge.benchmark.sizing import SizeError, Sizes, flops_per_token, parameter_count, sizes_for
from clusterforge.benchmark.store import BenchmarkStore
from clusterforge.catalog import load_hardware
from clusterforge.journal import Journal, now_iso, stack_dir
from clusterforge.node.remote import Runner, node_runner
from clusterforge.providers import Provider, get_provider
from clusterforge.providers.base import Node
from clusterforge.slurm.admission import Admission, AdmissionError
from clusterforge.spec.models import ClusterSpec
from clusterforge.status import node_versions

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


class Refused(Exception):
    """Stopped before any job: the message says what to change."""


@dataclass
class Seams:
    provider: Provider | None = None
    runner: Callable[..., Runner] = node_runner
    timing: Timing = field(default_factory=Timing)
    run_id: str = ""  # default: the UTC time


@dataclass
class Outcome:
    code: int
    result: dict[str, Any] | None = None
    paths: dict[str, str] = field(default_factory=dict)


def _run_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def candidates(spec: ClusterSpec, nodes: list[Node], journal: Journal) -> list[Candidate]:
    out = []
    for n in nodes:
        if n.role != "gpu":
            continue
        rec = journal.record(n.name)
        out.append(
            Candidate(
                n.name,
                n.instance_type,
                n.state == "running",
                rec.verdict == "pass" and journal.is_done(n.name, "certified"),
                bool(rec.certifying),
                rec.verdict,
                rec.reason,
            )  # fmt: skip
        )
    return out


def prepare_context(
    spec: ClusterSpec, workloads: list[str], counts: list[int], seams: Seams
) -> tuple[Plan, Sizes, Node, list[Node]]:
    """Everything decided before a job: the plan, the sizes, the head node. Raises Refused."""
    if not spec.storage.shared_path:
        raise Refused(
            f"stack {spec.stack!r} has no shared storage (storage.fsx_lustre, storage.nfs or storage.shared_volume): "
            "the benchmark's jobs, dataset and results live there"
        )
    provider = seams.provider or get_provider(spec)
    nodes = provider.nodes(spec)
    heads = sorted((n for n in nodes if n.role == "head" and n.state == "running"), key=lambda n: n.name)
    if not heads:
        raise Refused(
            f"stack {spec.stack!r} has no running head node: run `invoke up --stack {spec.stack}` first"
        )
    try:
        slurm = Admission(seams.runner(heads[0], timeout_s=60)).nodes()
    except AdmissionError as exc:
        raise Refused(f"cannot read Slurm's node states through {heads[0].name}: {exc}") from None
    journal = Journal(spec.stack, stack_dir(spec.stack).parent)
    plan = make_plan(workloads, counts, candidates(spec, nodes, journal), slurm)
    if not plan.instance_type:
        raise Refused(f"stack {spec.stack!r} has no compute nodes")
    it = load_hardware().get(plan.instance_type)
    if it is None:
        raise Refused(f"instance type {plan.instance_type!r} is not in the hardware catalogue")
    try:
        sizes = sizes_for(spec.benchmark, it)
    except SizeError as exc:
        raise Refused(str(exc)) from None
    return plan, sizes, heads[0], nodes


def benchmark(
    spec: ClusterSpec,
    workloads: list[str],
    counts: list[int],
    note: Callable[[str], None] = print,
    seams: Seams | None = None,
) -> Outcome:
    seams = seams or Seams()
    try:
        plan, sizes, head_node, nodes = prepare_context(spec, workloads, counts, seams)
    except (Refused, PlanError) as exc:
        note(f"refused: {exc}")
        return Outcome(EXIT_REFUSED)
    for s in plan.skipped:
        note(f"skipped: {s.workload} at {s.count} node(s): {s.reason}")
    for n in plan.notes:
        note(f"note: {n}")
    if not plan.runs:
        note("nothing to run: no asked node count fits the certified idle nodes")
        return Outcome(EXIT_FAILED)
    run_id = seams.run_id or _run_id()
    started = now_iso()
    it = load_hardware()[plan.instance_type]
    shared = spec.storage.shared_path or ""
    jobs = JobSet(
        run_id, shared, spec.benchmark.time_limit_min, gpus_per_node=it.gpu_count,
        container_image=(spec.benchmark.container_image or "") if spec.software.pyxis else "",
    )  # fmt: skip
    if spec.benchmark.container_image and not spec.software.pyxis:
        note("note: benchmark.container_image is ignored: the cluster has no pyxis (software.pyxis)")
    addresses = {n.name: Address(n.name, n.address) for n in nodes}
    head: HeadRun = seams.runner(head_node, timeout_s=max(120.0, jobs.deadline_s + 60))
    store = BenchmarkStore(spec.stack)
    runs = list(plan.runs)
    needs_data = any(r.workload in ("train", "data") for r in runs)
    prep = Run("prepare", (plan.eligible[0],))
    configs = {}
    for i, run in enumerate([prep, *runs] if needs_data else runs):
        key = "prepare" if run.workload == "prepare" else run.key
        cfg = job_config(jobs, key, run.workload, [addresses[n] for n in run.nodes], sizes, i)
        configs[f"{jobs.run_folder(key)}/job.json"] = _json(cfg)
    problem = write_files(head, configs)
    outputs: list[JobOutput] = []
    if problem:
        note(f"refused: {problem}")
        return Outcome(EXIT_REFUSED)
    if needs_data:
        shape = {k: sizes.data[k] for k in ("shards", "samples_per_shard", "sample_bytes")}
        if not dataset_ready(head, jobs.data_path(sizes), shape):
            note(f"dataset: writing {shape['shards']} shards of {shape['samples_per_shard']} x {shape['sample_bytes'] // 1024} KiB "
                 f"to {jobs.data_path(sizes)} ({prep.nodes[0]})")  # fmt: skip
            out = run_job(head, jobs, "prepare", "prepare", prep.nodes, seams.timing)
            store.save_raw(run_id, "prepare", out.files)
            failed = parse_job(out, 1, 0).failures
            if failed:
                for line in failed:
                    note(f"failed: {line}")
                outputs.append(out)
                for r in runs:  # training and the loader need the data; inference does not
                    if r.workload != "infer":
                        why = "not submitted: the dataset could not be written (see prepare)"
                        outputs.append(JobOutput(r.key, r.workload, r.nodes, jobs.run_folder(r.key), why))
                runs = [r for r in runs if r.workload == "infer"]
    for run in runs:
        note(f"{run.key}: {run.workload} on {', '.join(run.nodes)} ...")
        out = run_job(head, jobs, run.key, run.workload, run.nodes, seams.timing)
        store.save_raw(run_id, run.key, out.files)
        outputs.append(out)
        note(f"{run.key}: {out.state} in {out.seconds:.0f} s")
    doc = analyse(spec, plan, sizes, jobs, outputs, run_id, started, nodes)
    previous = store.previous(doc["comparable"], run_id)
    found = compare.regressions(doc, previous, spec.benchmark.regression_pct)
    doc["previous_run"] = previous.get("run_id") if previous else None
    doc["regressions"] = [r.__dict__ for r in found]
    gates = compare.gates(spec.benchmark, doc["train"]["points"], found)
    doc["gates"] = [g.__dict__ for g in gates]
    doc["verdict"] = verdict(doc, gates)
    doc["finished"] = now_iso()
    from clusterforge.benchmark.html import render

    path = store.save(doc)
    page = store.save_html(run_id, render(doc))
    code = EXIT_OK if doc["verdict"]["ok"] else EXIT_FAILED
    return Outcome(
        code, doc, {"result": str(path), "html": str(page), "raw": str(store.run_dir(run_id) / "raw")}
    )


def _json(data: dict[str, Any]) -> str:
    import json

    return json.dumps(data, indent=1)


def analyse(
    spec: ClusterSpec, plan: Plan, sizes: Sizes, jobs: JobSet, outputs: list[JobOutput], run_id: str, started: str,
    nodes: list[Node],
) -> dict[str, Any]:  # fmt: skip
    """The result document from the jobs' outputs (pure but for the catalogue and journal reads)."""
    settings = spec.benchmark
    it = load_hardware()[plan.instance_type]
    peak = it.gpu.peak_bf16_tflops * 1e12 if it.gpu is not None else None
    fpt = flops_per_token(sizes.model)
    tokens_per_rank_step = int(sizes.train["micro_batch"]) * sizes.model["seq_len"]
    steps = int(sizes.train["steps"])
    points: list[breakdown.TrainPoint] = []
    failures: list[str] = []
    runs_doc: list[dict[str, Any]] = []
    telemetry: dict[str, Any] = {}
    software: dict[str, dict[str, str]] = {}
    infer_rows, loader_rows = [], []
    for out in outputs:
        parsed = parse_job(out, sizes.ranks_per_node, steps)
        failures.extend(parsed.failures)
        runs_doc.append({"key": out.key, "workload": out.workload, "nodes": list(out.nodes), "job_id": out.job_id,
                         "state": "failed" if parsed.failures else out.state, "slurm_state": out.state,
                         "seconds": out.seconds, "output": out.folder, "failures": parsed.failures})  # fmt: skip
        for name, node in parsed.nodes.items():
            if node.software:
                software.setdefault(name, dict(node.software))
        if parsed.telemetry:
            telemetry[out.key] = {n: result.telemetry_section(t) for n, t in parsed.telemetry.items()}
        if parsed.failures:
            continue
        if out.workload == "train":
            points.append(
                breakdown.analyse(
                    parsed.ranks,
                    len(out.nodes),
                    tokens_per_rank_step,
                    flops_per_token=fpt if peak else None,
                    peak_flops_per_rank=peak,
                    slow_gap=settings.slow_rank_gap_pct / 100,
                )  # fmt: skip
            )
        elif out.workload == "infer":
            for name, text in out.files.items():
                if name.startswith("infer-") and name.endswith(".jsonl"):
                    infer_rows.extend(parse_infer(text))
        elif out.workload == "data":
            loader_rows.extend(parse_loader(out.files.get("data.jsonl", "")))
    points = breakdown.with_efficiency(points)
    found = attribution.limits(points, settings.limit_share_pct / 100)
    by_nodes = {lim.nodes: lim for lim in found}
    top = attribution.verdict(found)
    ipoints = inference.points(infer_rows)
    knee = inference.knee(ipoints)
    one = next((p for p in points if p.nodes == 1), None)
    consumed = (
        sizes.ranks_per_node * int(sizes.train["micro_batch"]) / one.step_median
        if one and one.step_median > 0
        else None
    )
    journal = Journal(spec.stack, stack_dir(spec.stack).parent)
    for name in sorted({n for o in outputs for n in o.nodes}):
        software.setdefault(name, {}).update(node_versions(journal, name))
    sizes_doc = {**sizes.as_dict(), "parameters": parameter_count(sizes.model), "flops_per_token": fpt}
    return {
        "schema": result.SCHEMA,
        "schema_version": result.SCHEMA_VERSION,
        "run_id": run_id,
        "stack": spec.stack,
        "instance_type": plan.instance_type,
        "started": started,
        "finished": "",
        "comparable": result.comparable_key(plan.instance_type, sizes.as_dict()),
        "sizes": sizes_doc,
        "plan": {
            "eligible": list(plan.eligible),
            "excluded": plan.excluded,
            "skipped": [{"workload": s.workload, "nodes": s.count, "reason": s.reason} for s in plan.skipped],
            "notes": [*plan.notes, *sizes.notes],
        },
        "software": dict(sorted(software.items())),
        "software_set": result.software_set(software),
        "train": {
            "points": [result.train_point(p, by_nodes.get(p.nodes)) for p in points],
            "limit": result.limit_dict(top),
            "line": result.train_line(points, top),
        },
        "infer": {
            "points": [result.infer_point(p) for p in ipoints],
            "knee": knee.batch if knee else None,
            "line": inference.knee_line(ipoints, knee) if ipoints else "no inference figures",
        },
        "data": result.data_section(delivery.judge(loader_rows, consumed, int(sizes.data["sample_bytes"]))),
        "telemetry": telemetry,
        "runs": runs_doc,
        "failures": failures,
    }


def verdict(doc: dict[str, Any], gates: list[compare.Gate]) -> dict[str, Any]:
    lines = []
    if doc["train"]["points"]:
        lines.append(f"training: {doc['train']['line']}")
    if doc["infer"]["points"]:
        lines.append(f"inference: {doc['infer']['line']}")
    if doc["data"]["rows"]:
        lines.append(f"data: {doc['data']['line']}")
    lines += [f"FAILED: {f}" for f in doc["failures"]]
    lines += [f"regression: {r['line']}" for r in doc["regressions"]]
    lines += [f"gate {'passed' if g.passed else 'FAILED'}: {g.line}" for g in gates]
    lines += [
        f"skipped: {s['workload']} at {s['nodes']} node(s): {s['reason']}" for s in doc["plan"]["skipped"]
    ]
    ok = not doc["failures"] and all(g.passed for g in gates)
    return {"ok": ok, "lines": lines}
