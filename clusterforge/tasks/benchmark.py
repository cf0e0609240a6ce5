"""benchmark: representative training, inference and data loading on the cluster (thin: parse, call
``clusterforge.benchmark.run``, print)."""

from __future__ import annotations

import json as jsonlib
import sys

from invoke import Context, task
from invoke.exceptions import Exit

from clusterforge.tasks._cli import friendly, locked
from clusterforge.tasks.cluster import load


@task(
    help={
        "stack": "stack name: stacks/NAME.yaml",
        "spec": "path of a spec file (instead of --stack)",
        "workload": "train, infer, data or all (or a comma list)",
        "nodes": "training node counts, e.g. 1,2,4 (inference and the loader sweep run on one node)",
        "json": "print the result document (docs/benchmark.md) on stdout; progress goes to stderr",
        "html": "print the path of the HTML page at the end (it is always written)",
        "wait": "when another command holds the stack's lock, wait for it instead of exiting 2",
    }
)
@friendly
def benchmark(
    c: Context,
    stack: str = "",
    spec: str = "",
    workload: str = "all",
    nodes: str = "1,2,4",
    json: bool = False,
    html: bool = False,
    wait: bool = False,
) -> None:
    """Run representative workloads as Slurm jobs on certified idle nodes and say what limits them.

    Training (a small decoder-only transformer, DDP: NCCL on GPUs, gloo on CPU nodes) at each node
    count: tokens/s, step time, scaling efficiency against one node, the step-time breakdown
    (compute, exposed communication, data-loader wait, optimizer, checkpoint) and the limit;
    inference (tokens/s, latency p50/p99 by batch size, the knee); data delivery from shared
    storage against the training step's appetite; telemetry per node. Results go to
    .clusterforge/NAME/benchmarks/<run>/ (result.json, report.html, raw/), compared with the last
    comparable run. Exit 0 ok, 1 a run or a gate (spec `benchmark:`) failed, 2 refused.
    """
    from clusterforge.benchmark.plan import PlanError, parse_counts, parse_workloads
    from clusterforge.benchmark.run import benchmark as run_benchmark

    try:
        workloads, counts = parse_workloads(workload), parse_counts(nodes)
    except PlanError as exc:
        raise Exit(str(exc), code=2) from None
    cluster = load(stack, spec)
    out = sys.stderr if json else sys.stdout

    def note(text: str) -> None:
        print(text, file=out, flush=True)

    with locked(cluster.stack, "benchmark", wait):
        outcome = run_benchmark(cluster, workloads, counts, note=note)
    doc = outcome.result
    if doc is not None:
        for line in doc["verdict"]["lines"]:
            note(line)
        note(f"result: {outcome.paths['result']}")
        if html:
            note(f"html: {outcome.paths['html']}")
        if json:
            print(jsonlib.dumps(doc, indent=1))
    if outcome.code:
        raise Exit(code=outcome.code)
