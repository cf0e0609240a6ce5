"""The workstation's side of `up` and `certify` at 16 to 4,096 nodes: time, peak memory and growth per step.

    .venv/bin/python benchmarks/workstation_scale.py [--sizes 16 256 1024 4096] [--steps journal ...]
                                                     [--budget 300]

A synthetic spec (stacks/prod.yaml with its p5.48xlarge pool resized to N nodes) goes through
the project's own code at its seams: fake nodes and a fake Slurm head node
(tests/pipeline/fakes.py, the same fakes the pipeline tests use), no Ansible, no containers.
Each step runs at each size in a process of its own, so its peak RSS is its own:

- journal: a fresh `up`'s journal writes through clusterforge/journal.py (7 per node: observe,
  provisioned, configured, applied, drift baseline, certifying, certified), then a load;
- inventory: the rendered inventory of the stack (clusterforge/inventory.py), written;
- configure-prep: the configure stage's drift inputs per node (clusterforge/drift/nodes.py
  nodes_now: input fingerprints and what each node's roles manage, from the roles' templates)
  and its decisions on a fresh stack;
- admission: the certify stage around its checks (pipeline/certify_stage.py with the checks and
  the group tests stubbed, 1 % of the nodes failing): wait for registration, hold, liveness
  (sinfo, probe job), release or drain; the head commands it sends are counted;
- network: the network step (pipeline/network_stage.py) over every node, the planner's rounds run
  as fake Slurm jobs plus the scaling rounds; the largest stdin and argument sent to the head;
- html: the people's report (clusterforge/reports) over N node reports, network and fleet files;
- board: the live board (pipeline/display.py) on a terminal, 30 events per node;
- status-json / plan-json: `status --json` (clusterforge/status.py) and `plan --json` with one
  version bump (clusterforge/plan), their output sizes; plan also its table's lines and the
  markdown's characters.

A step that outlives ``--budget`` seconds at a size is stopped there and its larger sizes are
not run; the table shows the time it reached ("> B") and the growth fitted over the sizes it
finished. Each cell is "CPU s/wall s peak MiB": the CPU time (user + system) of the step is its
own work, the figure judged and fitted; wall time on a shared 2-core machine mostly measures the
neighbours (it is shown beside; a step that waits on the disk, the journal's fsyncs, shows it
there). The growth exponent is the least-squares slope of log(CPU time) on log(nodes) over the
sizes from 256 up (at 16 fixed costs dominate). Compare exponents and ratios, not a lone
absolute time.
The last line, for scripts: `workstation scale: 4096 nodes, slowest step S s, peak M MiB, worst exponent K`
(a step stopped by the budget counts with its time extrapolated along its own growth).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FAIL_FRACTION = 0.01  # nodes failing their single-node checks in the admission step
EVENTS_PER_NODE = 30  # board: 3 stages x (waiting, running, done) + 18 task events + 3 notes


# -- the synthetic stack ------------------------------------------------------------------------


def spec_for(nodes: int, stack: str = "scale") -> Any:
    from clusterforge.spec.loader import load_spec

    spec, _ = load_spec(ROOT / "stacks" / "prod.yaml")
    pools = [
        p.model_copy(update={"count": nodes, "capacity_reservation_size": None}) if p.role == "gpu" else p
        for p in spec.node_pools
    ]
    return spec.model_copy(update={"stack": stack, "node_pools": pools})


def fake_nodes(spec: Any) -> list[Any]:
    from clusterforge.providers.base import Node

    out = []
    for pool in spec.node_pools:
        for i, name in enumerate(spec.node_names(pool)):
            conn = {"ansible_connection": "local"}
            address = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            out.append(
                Node(name, address, pool.name, pool.role, pool.instance_type, conn, f"i-{name}", "running")
            )
    return out


def compute(nodes: list[Any]) -> list[Any]:
    return [n for n in nodes if n.role == "gpu"]


class QuietJournal:
    """A journal that keeps records in memory only: the steps other than `journal` measure their
    own work, not the journal's writes (the journal step measures those)."""

    @staticmethod
    def make(stack: str, root: Path) -> Any:
        from clusterforge.journal import Journal

        class _Quiet(Journal):
            def _append(self, entry: dict[str, Any]) -> None:  # no log line written
                return None

        return _Quiet(stack, root)


class Sizes:
    """The largest stdin and argument the fake head node was sent (bytes)."""

    stdin = 0
    arg = 0
    args_total = 0


def sized_head(slurm: Any) -> Callable[..., tuple[int, str, str]]:
    def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        Sizes.stdin = max(Sizes.stdin, len(stdin or ""))
        Sizes.arg = max([Sizes.arg, *(len(a.encode()) for a in argv)])
        Sizes.args_total = max(Sizes.args_total, sum(len(a.encode()) + 1 for a in argv))
        return slurm(argv, stdin=stdin)

    return run


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    """(wall, CPU) seconds since ``start``: on a shared machine the CPU time is the step's own work."""
    return time.perf_counter() - start[0], time.process_time() - start[1]


# -- steps ---------------------------------------------------------------------------------------


def step_journal(n: int, tmp: Path) -> dict[str, Any]:
    from clusterforge.journal import Journal

    names = [f"gpu-{i:03d}" for i in range(1, n + 1)]
    # What a converge records per node: fingerprints of ~15 roles and ~100 managed items.
    inputs = {f"role r{k}": f"{k:064x}" for k in range(15)}
    items = {f"package pkg-{k}": f"{k:064x}" for k in range(100)}
    started = clock()
    journal = Journal("scale", tmp)
    for name in names:
        journal.observe(name, f"i-{name}")
        journal.mark_done(name, "provisioned")
        journal.mark_done(name, "configured")
        journal.record_applied(name, {"inputs": inputs, "pinned": {"nccl_version": "2.26.2"}})
        journal.record_drift(name, {"at": "2026-12-02T00:00:00+00:00", "inputs": inputs, "items": items})
        journal.annotate(name, certifying="20261202-000000")
        journal.mark_done(name, "certified", verdict="pass", certifying="", run_id="20261202-000000")
    loaded = Journal("scale", tmp)
    assert len(loaded.nodes) == n
    seconds, cpu = since(started)
    size = sum(p.stat().st_size for p in (tmp / "scale").rglob("*") if p.is_file())
    return {"seconds": seconds, "cpu": cpu, "state_mb": round(size / 1e6, 1)}


def step_inventory(n: int, tmp: Path) -> dict[str, Any]:
    from clusterforge.inventory import render_inventory, write_inventory

    spec = spec_for(n)
    nodes = fake_nodes(spec)
    started = clock()
    write_inventory(render_inventory(spec, nodes, tmp / "munge.key"), tmp / "inv")
    seconds, cpu = since(started)
    return {"seconds": seconds, "cpu": cpu}


def step_configure_prep(n: int, tmp: Path) -> dict[str, Any]:
    from clusterforge.drift.nodes import decisions, nodes_now
    from clusterforge.inventory import render_inventory, write_inventory

    spec = spec_for(n)
    nodes = fake_nodes(spec)
    write_inventory(render_inventory(spec, nodes, tmp / "munge.key"), tmp / "inv")
    journal = QuietJournal.make("scale", tmp)
    started = clock()
    now = nodes_now(spec, nodes, tmp / "inv", ROOT / "playbooks")
    errors = [v.error for v in now.values() if v.error]
    no_runner: Any = None  # a fresh stack: no baseline, so no digest is gathered from a node
    decided = decisions(journal, {x.name: x for x in nodes}, now, lambda *_a, **_k: no_runner)
    seconds, cpu = since(started)
    assert all(d.converge for d in decided.values())
    return {"seconds": seconds, "cpu": cpu, "errors": len(errors)}


def _context(spec: Any, nodes: list[Any], slurm: Any, tmp: Path, board: Any = None) -> Any:
    from rich.console import Console

    from clusterforge.pipeline.context import Options, StackContext, StackPaths
    from clusterforge.pipeline.display import Board
    from tests.pipeline.fakes import FakeProvider

    paths = StackPaths(
        tmp / "state", tmp / "state" / "run", tmp / "state" / "reports", tmp / "inv", tmp / "munge"
    )
    board = board or Board([], Console(file=io.StringIO()), live=False)
    ctx = StackContext(
        spec, FakeProvider(), QuietJournal.make(spec.stack, tmp), paths, board, Options(recertify=True),
        nodes={x.name: x for x in nodes}, runner=lambda _node, timeout_s=0: sized_head(slurm),
    )  # fmt: skip
    return ctx


def step_admission(n: int, tmp: Path) -> dict[str, Any]:
    from clusterforge.certify.fleet.judge import FleetJudgement
    from clusterforge.node.reports import Verdict
    from clusterforge.pipeline import certify_stage, network_stage
    from tests.pipeline.fakes import FakeSlurm

    spec = spec_for(n)
    nodes = fake_nodes(spec)
    slurm = FakeSlurm()
    for x in compute(nodes):
        slurm.register(x.name)
    ctx = _context(spec, nodes, slurm, tmp)
    every = max(1, round(1 / FAIL_FRACTION))
    failing = {x.name for i, x in enumerate(compute(nodes)) if i % every == every - 1}

    class Stage(certify_stage.CertifyStage):
        """The certify stage with its checks stubbed: what is left is admission and liveness."""

        def _single_node(self, todo: list[Any], run_id: str, reports: dict[str, Any]) -> dict[str, Verdict]:
            return {
                x.name: Verdict(x.name, False, [("gpu-health", "Xid 79 on GPU 3")])
                if x.name in failing
                else Verdict(x.name, True)
                for x in todo
            }

        def _fleet(self, todo: list[Any], reports: dict[str, Any]) -> Any:
            return FleetJudgement({}, [], [])

        def _html(self, names: list[str]) -> None:
            return None

    def passes(self: Any, group: list[Any], batch: set[str]) -> Any:
        return network_stage.NetworkOutcome({x.name: Verdict(x.name, True) for x in group}, None)

    network_stage.NetworkStep.run = passes  # type: ignore[method-assign]  # the group tests stubbed out
    stage = Stage(ctx)
    started = clock()
    results = stage.run([x.name for x in nodes])
    seconds, cpu = since(started)
    bad = sorted(k for k, r in results.items() if not r.ok)
    assert set(bad) == failing, bad[:5]
    assert all(slurm.nodes[x]["state"] == "drained" for x in failing)
    return {"seconds": seconds, "cpu": cpu, "head_commands": len(slurm.calls)}


def nccl_slurm() -> Any:
    """The fake head, its group jobs answering as nccl-multi-node does on a p5 pair or group: rank
    0's report carries each collective's busbw (the third node of every hundred is slow)."""
    from clusterforge.slurm.parse import expand_hostlist
    from tests.fixtures.reports import check
    from tests.pipeline.fakes import FakeSlurm

    class NcclSlurm(FakeSlurm):
        def _sbatch(self, argv: list[str]) -> tuple[int, str, str]:
            rc, out, err = super()._sbatch(argv)
            nodes = sorted(expand_hostlist(argv[argv.index("-w") + 1]))
            slow = any(int(x.rsplit("-", 1)[1]) % 100 == 3 for x in nodes)
            for path in [p for p in self.files if p.endswith("/report.json") and "/" + nodes[0] + "/" in p]:
                report = json.loads(self.files[path])
                if report.get("checks", [{}])[0].get("id") != "gloo-allreduce":
                    continue
                metrics = {}
                for c in ("all_reduce", "all_gather", "alltoall"):
                    label = f"{c}.{len(nodes)}node"
                    metrics[f"{label}.busbw"] = {
                        "value": (120.0 if slow else 480.0) - len(self.jobs) % 5,
                        "unit": "GB/s",
                    }
                    metrics[f"{label}.message_bytes"] = {"value": float(1 << 33), "unit": "B"}
                report["checks"] = [check("nccl-multi-node", metrics=metrics)]
                self.files[path] = json.dumps(report)
            return rc, out, err

    return NcclSlurm()


def step_network(n: int, tmp: Path) -> dict[str, Any]:
    from clusterforge.pipeline.network_stage import NetworkStep

    spec = spec_for(n)
    nodes = fake_nodes(spec)
    slurm = nccl_slurm()
    for x in compute(nodes):
        slurm.register(x.name)
        slurm.nodes[x.name]["state"] = "idle"
    ctx = _context(spec, nodes, slurm, tmp)
    from clusterforge.slurm.admission import Admission

    admission = Admission(sized_head(slurm))
    step = NetworkStep(
        ctx, admission, [x for x in nodes if x.role == "head"][0], "20261202-000000", "standard"
    )
    group = compute(nodes)
    started = clock()
    outcome = step.run(group, {x.name for x in group})
    seconds, cpu = since(started)
    passed = sum(1 for v in outcome.verdicts.values() if v.passed)
    return {
        "seconds": seconds,
        "cpu": cpu,
        "passed": passed,
        "jobs": len(slurm.jobs),
        "max_stdin_mb": round(Sizes.stdin / 1e6, 2),
        "max_arg_kb": round(Sizes.arg / 1e3, 1),
        "max_argv_kb": round(Sizes.args_total / 1e3, 1),
    }


def _node_report(name: str, template: dict[str, Any], i: int) -> dict[str, Any]:
    report = json.loads(json.dumps(template))
    report.update(node=name, instance_type="p5.48xlarge", run_id="20261202-000000")
    for check in report["checks"]:
        if check["id"] == "matmul-burnin":
            check["metrics"] = {
                **{
                    f"rate_device_{g}": {"value": 790.0 + (i * 7 + g) % 11, "unit": "TFLOP/s"}
                    for g in range(8)
                },
                "rate_median": {"value": 795.0, "unit": "TFLOP/s"},
            }
            check["threshold"] = {
                "matmul.tflops_min": {"value": 600.0, "unit": "TFLOP/s"},
                "matmul.median_gap_pct": {"value": 5, "unit": "%"},
            }
        if check["id"] == "nccl-single-node":
            sizes = [float(1 << k) for k in range(20, 34)]
            check.update(status="pass", summary="all_reduce 480 GB/s at 8 GiB")
            check["metrics"] = {
                "all_reduce.1node.busbw": {"value": 480.0 - i % 7, "unit": "GB/s"},
                "all_reduce.1node.message_bytes": {"value": sizes[-1], "unit": "B"},
            }
            check["series"] = {
                "all_reduce.1node.busbw": {"x_unit": "B", "y_unit": "GB/s",
                                           "points": [[s, 480.0 * k / len(sizes)] for k, s in enumerate(sizes, 1)]}
            }  # fmt: skip
    return report


def write_reports(names: list[str], reports: Path) -> None:
    template = json.loads((ROOT / "tests" / "data" / "validators-report" / "local-quick.json").read_text())
    groups = []
    for i, name in enumerate(names):
        folder = reports / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "report.json").write_text(json.dumps(_node_report(name, template, i)))
        peer = names[i ^ 1] if (i ^ 1) < len(names) else names[0]
        figure = 480.0 - i % 9
        network = {
            "schema_version": 1, "node": name, "profile": "standard", "verdict": "pass",
            "run_id": "20261202-000000",
            "checks": [{"id": "nccl-multi-node", "status": "pass", "summary": "passes with 2 partners",
                        "metrics": {f"busbw.with.{peer}.r1": {"value": figure, "unit": "GB/s"}},
                        "threshold": {"2node.reference": 480.0},
                        "evidence": {"command": "group tests", "lines": [f"round 1 screen: {name} {peer}: {figure} GB/s (done)"]}}],
        }  # fmt: skip
        (folder / "network-report.json").write_text(json.dumps(network))
        if i % 2 == 0:
            curve = [[float(1 << k), figure * k / 33] for k in range(20, 34)]
            groups.append({"round": 1, "purpose": "screen", "nodes": [name, peer], "figure": figure,
                           "state": "done", "message_bytes": float(1 << 33), "curve": curve, "size": 2})  # fmt: skip
    (reports / "network-groups.json").write_text(
        json.dumps(
            {
                "run_id": "20261202-000000",
                "rounds": 1,
                "jobs": len(groups),
                "problem": "",
                "references": {},
                "groups": groups,
                "by_size": [],
                "nodes": {},
                "links": [],
            }
        )  # fmt: skip
    )
    values = {name: 790.0 + i % 11 for i, name in enumerate(names)}
    fleet = {"groups": [{"metric": "matmul-burnin.rate_median", "instance_type": "p5.48xlarge", "unit": "TFLOP/s",
                         "reference": 795.0, "reference_kind": "fleet median", "warn_at": 760.0, "fail_at": 700.0,
                         "values": values}], "notes": []}  # fmt: skip
    (reports / "fleet.json").write_text(json.dumps(fleet))


def step_html(n: int, tmp: Path) -> dict[str, Any]:
    from clusterforge.reports import write_run_html

    names = [f"gpu-{i:03d}" for i in range(1, n + 1)]
    reports = tmp / "reports"
    write_reports(names, reports)
    out = tmp / "report.html"
    started = clock()
    write_run_html(reports, out, stack="scale", nodes=names, run_ids=dict.fromkeys(names, "20261202-000000"))
    seconds, cpu = since(started)
    pages = [p for p in [out, *(tmp / "report-nodes").glob("*.html")] if p.is_file()]
    return {
        "seconds": seconds,
        "cpu": cpu,
        "page_mb": round(out.stat().st_size / 1e6, 2),
        "largest_page_mb": round(max(p.stat().st_size for p in pages) / 1e6, 2),
        "pages": len(pages),
        "all_pages_mb": round(sum(p.stat().st_size for p in pages) / 1e6, 1),
    }


def step_board(n: int, tmp: Path) -> dict[str, Any]:
    from rich.console import Console

    from clusterforge.ansible.events import HostProgress
    from clusterforge.pipeline.display import Board
    from clusterforge.pipeline.scheduler import NodeProgress, Status

    names = [f"gpu-{i:03d}" for i in range(1, n + 1)]
    console = Console(file=io.StringIO(), force_terminal=True, width=160, height=60)
    board = Board([(x, "gpu") for x in names], console, live=True)
    events = 0
    started = clock()
    with board:
        for stage in ("provision", "configure", "certify"):
            for x in names:
                board.stage(NodeProgress(x, stage, Status.RUNNING))
                events += 1
            if stage == "configure":
                for task in range(18):
                    for x in names:
                        board.host(HostProgress(x, f"nccl : Install task {task}", ok=task))
                        events += 1
            for x in names:
                board.note(x, f"{stage}: step done")
                events += 1
            for i, x in enumerate(names):
                failed = stage == "certify" and i % 100 == 99
                status = Status.FAILED if failed else Status.WAITING
                passed = [] if failed else [stage]
                board.stage(
                    NodeProgress(x, stage, status, "gpu-health: Xid 79" if failed else "", passed=passed)
                )
                events += 1
    seconds, cpu = since(started)
    return {
        "seconds": seconds,
        "cpu": cpu,
        "events_per_cpu_s": round(events / max(cpu, 1e-6)),
        "events": events,
    }


def step_status_json(n: int, tmp: Path) -> dict[str, Any]:
    from clusterforge.journal import Journal
    from clusterforge.status import collect
    from tests.pipeline.fakes import FakeProvider, FakeSlurm

    os.environ["CLUSTERFORGE_STATE_DIR"] = str(tmp / "state")
    spec = spec_for(n)
    provider = FakeProvider()
    provider.create(spec)
    slurm = FakeSlurm()
    journal = Journal(spec.stack, tmp / "state")  # written before the timing starts
    for pool in spec.node_pools:
        for name in spec.node_names(pool):
            if pool.role == "gpu":
                slurm.nodes[name] = {"state": "idle", "reason": ""}
                journal.mark_done(name, "certified", verdict="pass", certified_at="2026-12-02T00:00:00+00:00")
    journal.compact()  # one snapshot, outside the timing
    started = clock()
    rows = collect(spec, provider, slurm.runner)
    text = json.dumps([r.as_dict() for r in rows], indent=2)
    seconds, cpu = since(started)
    return {"seconds": seconds, "cpu": cpu, "json_mb": round(len(text) / 1e6, 2)}


def step_plan_json(n: int, tmp: Path) -> dict[str, Any]:
    from rich.console import Console

    from clusterforge.plan.impact import LiveNode, LiveState, plan_impacts
    from clusterforge.plan.inputs import stack_inputs
    from clusterforge.plan.render import Plan, json_text, markdown, table

    spec = spec_for(n)
    software = spec.software.model_copy(update={"nccl": "2.27.3"})
    bumped = spec.model_copy(update={"software": software})
    live = LiveState(
        {
            x.name: LiveNode(x.name, serving=x.role == "gpu", slurm_state="idle", pool=x.pool)
            for x in fake_nodes(spec)
        }
    )
    started = clock()
    old = stack_inputs(spec, ROOT, "main")
    new = stack_inputs(bumped, ROOT, "working tree")
    plan = Plan(spec.stack, old.label, new.label, plan_impacts(old, new, live))
    text = json_text(plan)
    md = markdown(plan)
    out = io.StringIO()
    Console(file=out, width=160).print(table(plan) if plan.pending else plan.headline())
    seconds, cpu = since(started)
    return {
        "seconds": seconds,
        "cpu": cpu,
        "json_mb": round(len(text) / 1e6, 2),
        "markdown_chars": len(md),
        "table_lines": out.getvalue().count("\n"),
    }


STEPS: dict[str, Callable[[int, Path], dict[str, Any]]] = {
    "journal": step_journal,
    "inventory": step_inventory,
    "configure-prep": step_configure_prep,
    "admission": step_admission,
    "network": step_network,
    "html": step_html,
    "board": step_board,
    "status-json": step_status_json,
    "plan-json": step_plan_json,
}


# -- driver --------------------------------------------------------------------------------------


def one(step: str, n: int) -> dict[str, Any]:
    # The fake head answers at once: the group runner's polling sleeps are not workstation work.
    time.sleep = lambda _s: None
    with tempfile.TemporaryDirectory(prefix=f"ws-{step}-") as tmp:
        os.environ.setdefault("CLUSTERFORGE_STATE_DIR", str(Path(tmp) / "state"))
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        result = STEPS[step](n, Path(tmp))
        result["wall"] = result.pop("seconds")
        result["seconds"] = result.pop("cpu")
    result["peak_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result["start_mib"] = round(base, 1)
    return result


def run_one(step: str, n: int, budget: float) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", step, str(n)],
            capture_output=True, text=True, timeout=budget, check=False, cwd=ROOT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {
            "seconds": time.perf_counter() - started,
            "wall": time.perf_counter() - started,
            "stopped": True,
        }
    if proc.returncode != 0:
        raise SystemExit(f"{step} at {n} nodes failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def exponent(points: list[tuple[int, float]]) -> float | None:
    pts = [(math.log(n), math.log(max(s, 1e-4))) for n, s in points if n >= 256]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    var = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / var if var else None


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        print(json.dumps(one(argv[1], int(argv[2]))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 256, 1024, 4096])
    ap.add_argument("--steps", nargs="+", default=list(STEPS), choices=list(STEPS))
    ap.add_argument("--budget", type=float, default=300.0, help="seconds a step may take at one size")
    args = ap.parse_args(argv)
    sizes = sorted(args.sizes)
    largest = sizes[-1]
    summary: list[tuple[str, float, float, float | None, bool]] = []
    print(f"{'step':<15}" + "".join(f"{n:>22,}" for n in sizes) + f"{'growth':>9}  notes (at {largest:,})")
    for step in args.steps:
        cells, points, last, stopped = [], [], {}, False
        for n in sizes:
            if stopped:
                cells.append("not run")
                continue
            r = run_one(step, n, args.budget)
            if r.get("stopped"):
                cells.append(f"> {args.budget:.0f} s")
                stopped = True
                continue
            points.append((n, r["seconds"]))
            cells.append(f"{r['seconds']:.2f}/{r['wall']:.1f} s {r['peak_mib']:.0f} MiB")
            last = r
        k = exponent(points)
        notes = ", ".join(
            f"{key} {v}" for key, v in last.items() if key not in ("seconds", "wall", "peak_mib", "start_mib")
        )
        grow = f"{k:.2f}" if k is not None else "-"
        print(f"{step:<15}" + "".join(f"{c:>22}" for c in cells) + f"{grow:>9}  {notes}", flush=True)
        at, slope = points[-1] if points else (sizes[0], 0.0), k if k is not None else 2.0
        seconds = at[1] * (largest / at[0]) ** slope if at[0] != largest or stopped else at[1]
        if stopped:  # its time at the largest size, along its own growth from where it was stopped
            seconds = max(seconds, args.budget * (largest / sizes[len(points)]) ** slope)
        summary.append((step, seconds, float(last.get("peak_mib", 0.0)), k, stopped))
    slowest = max(summary, key=lambda s: s[1])
    peak = max(s[2] for s in summary)
    worst = max((s[3] for s in summary if s[3] is not None), default=float("nan"))
    print(
        f"workstation scale: {largest} nodes, slowest step {slowest[1]:.1f} s, peak {peak:.0f} MiB, "
        f"worst exponent {worst:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
