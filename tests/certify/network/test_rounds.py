"""The group tests' rounds (rounds.py, jobs.py): jobs at once, polled to a deadline, figures read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterforge.certify.network import figures
from clusterforge.certify.network import jobs as jb
from clusterforge.certify.network import rounds as rd
from clusterforge.certify.network.planner import Planner, TestGroup
from clusterforge.slurm.parse import expand_hostlist
from tests.fixtures import reports as fake_reports

JOBS = jb.GroupJobs(
    "R1", "/shared", "quick", "clusterforge_cert", ["clusterforge-validators"], "gloo-allreduce", poll_s=0
)
CONFIGS = jb.NodeConfigs(lambda n: {"node": n}, lambda n: f"10.0.0.{sum(map(ord, n)) % 250}")


class Head:
    """A head node whose jobs finish (or hang) as told, with reports on a dict 'shared fs'."""

    def __init__(self, hang: set[str] = frozenset(), fail_submit: set[str] = frozenset()) -> None:
        self.files: dict[str, str] = {}
        self.calls: list[list[str]] = []
        self.hang, self.fail_submit = hang, fail_submit
        self.running: list[str] = []

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        self.calls.append(argv)
        if argv[:3] == ["python3", "-c", jb.SUBMIT]:  # runs each sbatch it is given, on the head
            return 0, json.dumps([list(self(a)) for a in json.loads(stdin or "[]")]), ""
        if argv[:3] == ["python3", "-c", jb.WRITE_FILES]:
            self.files.update(json.loads(stdin or "{}"))
            return 0, "", ""
        if argv == ["scontrol", "ping"]:
            return 0, "Slurmctld(primary) at head is UP\n", ""
        if argv[0] == "sbatch":
            nodes = expand_hostlist(argv[argv.index("-w") + 1])
            if set(nodes) & self.fail_submit:
                return 1, "", "sbatch: error: Batch job submission failed: Invalid node name specified"
            folder = argv[argv.index("-o") + 1].rsplit("/", 1)[0]
            job = str(100 + len(self.calls))
            if set(nodes) & self.hang:
                self.running.append(job)
                return 0, f"{job}\n", ""
            for rank, n in enumerate(sorted(nodes)):
                metrics = {
                    "busbw": {"value": 0.45, "unit": "GB/s"},
                    "message_bytes": {"value": 67108864, "unit": "B"},
                }
                check = fake_reports.check("gloo-allreduce", metrics=metrics if rank == 0 else {})
                self.files[f"{folder}/{n}/report.json"] = json.dumps(fake_reports.report(n, [check]))
            return 0, f"{job};cluster\n", ""
        if argv[0] == "squeue":
            return 0, "\n".join(self.running), ""
        if argv[0] == "scancel":
            self.running = []
            return 0, "", ""
        if argv[:3] == ["sh", "-c", jb.CAT_ROUND]:  # the round's reports, as the glob finds them
            prefix = f"{argv[4]}/r{argv[5]}-g"
            found = sorted(p for p in self.files if p.startswith(prefix) and p.endswith("/report.json"))
            outs = sorted(  # and each job's output (its tail) in a group's own folder
                p
                for p in self.files
                if p.startswith(prefix) and p.rsplit("/", 1)[-1].startswith("job-") and p.endswith(".out")
            )
            text = "".join(f"=== {p}\n{self.files[p]}\n" for p in found)
            return 0, text + "".join(f"=== {p}\n{self.files[p][-4096:]}\n" for p in outs), ""
        raise AssertionError(argv)


def groups(*pairs: tuple[str, str]) -> list[TestGroup]:
    return [TestGroup(p, 1, "screen") for p in pairs]


def test_a_round_runs_every_group_at_once_and_reads_rank0s_figure() -> None:
    head, log, clock = Head(), rd.RunLog(), iter(range(0, 10**6, 1))
    figures = rd.run_round(head, JOBS, groups(("a", "b"), ("c", "d")), CONFIGS, log,
                           clock=lambda: next(clock), sleep=lambda _: None)  # fmt: skip
    assert list(figures.values()) == [0.45, 0.45]
    writes = [c for c in head.calls if c[:3] == ["python3", "-c", jb.WRITE_FILES]]
    assert len(writes) == 2  # one command for the nodes' configs, one for the groups' member lists
    # each node's NODE.json once, with each run's limit under the job's (issue 22)
    config = json.loads(head.files["/shared/.clusterforge/cert/R1/nodes/b.json"])
    assert config == {"node": "b", "durations": {"workload_timeout_seconds": 600}}
    members = json.loads(head.files["/shared/.clusterforge/cert/R1/groups/r1-g0/members.json"])
    assert members == [
        {"name": "a", "address": CONFIGS.address("a")},
        {"name": "b", "address": CONFIGS.address("b")},
    ]
    assert len([c for c in head.calls if c[:3] == ["python3", "-c", jb.SUBMIT]]) == 1  # every sbatch in one
    sbatch = [c for c in head.calls if c[0] == "sbatch"]
    assert len(sbatch) == 2 and all("--reservation=clusterforge_cert" in c for c in sbatch)
    assert {c[c.index("-J") + 1] for c in sbatch} == {"clusterforge-net-R1-r1"}
    assert [r.state for r in log.records] == ["done", "done"] and log.records[0].message_bytes == 67108864


def test_a_job_that_hangs_is_cancelled_at_the_deadline_and_gives_no_result() -> None:
    head, log = Head(hang={"c"}), rd.RunLog()
    ticks = iter([0, 0, JOBS.deadline_s + 1, JOBS.deadline_s + 2])
    figures = rd.run_round(head, JOBS, groups(("a", "b"), ("c", "d")), CONFIGS, log,
                           clock=lambda: next(ticks), sleep=lambda _: None)  # fmt: skip
    assert figures[groups(("a", "b"))[0]] == 0.45
    assert figures[groups(("c", "d"))[0]] is None  # never all nodes failed because one job did
    assert ["scancel", "-n", "clusterforge-net-R1-r1"] in head.calls
    assert log.records[1].state.startswith("cancelled at the")


def test_a_group_that_cannot_be_submitted_gives_no_result_with_the_reason() -> None:
    head, log = Head(fail_submit={"a"}), rd.RunLog()
    figures = rd.run_round(
        head, JOBS, groups(("a", "b")), CONFIGS, log, clock=lambda: 0, sleep=lambda _: None
    )
    assert list(figures.values()) == [None]
    assert "Invalid node name" in log.records[0].state


def test_the_planner_loop_ends_with_verdicts() -> None:
    head = Head()
    result, log = rd.run_isolation(head, Planner(["a", "b", "c", "d"]), JOBS, CONFIGS,
                                   clock=lambda: 0, sleep=lambda _: None)  # fmt: skip
    assert all(v.ok for v in result.node_verdicts.values()), result.node_verdicts
    assert result.rounds >= 1 and len(log.records) == result.jobs


def test_figures_from_gloo_and_nccl_reports() -> None:
    gloo = {
        "checks": [
            {"id": "gloo-allreduce", "metrics": {"busbw": {"value": 0.44}, "message_bytes": {"value": 8}}}
        ]
    }
    assert figures.group_figure(gloo, "gloo-allreduce") == (0.44, 8.0)
    nccl = {"checks": [{"id": "nccl-multi-node", "metrics": {
        "all_reduce.2node.busbw": {"value": 441.0}, "all_reduce.2node.message_bytes": {"value": 2**30},
    }}]}  # fmt: skip
    assert figures.group_figure(nccl, "nccl-multi-node") == (441.0, float(2**30))
    assert figures.group_figure({"checks": [{"id": "gloo-allreduce", "metrics": {"busbw": {"value": "NaN"}}}]},
                           "gloo-allreduce") == (None, None)  # fmt: skip
    assert figures.group_figure(None, "x") == (None, None)


def test_parse_cat_keeps_missing_and_broken_files_apart() -> None:
    text = '=== /a/report.json\n{"node": "a"}\n\n=== /b/report.json\n\n=== /c/report.json\n{broken\n'
    assert figures.parse_cat(text) == {
        "/a/report.json": {"node": "a"},
        "/b/report.json": None,
        "/c/report.json": None,
    }


def test_gpu_pairs_run_one_launcher_with_the_ring_algorithm() -> None:
    jobs = jb.GroupJobs("R", "/s", "standard", "res", ["v"], "nccl-multi-node", one_launcher=True)
    argv = jobs.sbatch_argv(TestGroup(("n1", "n2"), 2, "confirm"), 0)
    assert "--export=ALL,NCCL_ALGO=Ring" in argv and not argv[-1].startswith("srun")
    assert "srun --ntasks-per-node=1" in JOBS.sbatch_argv(TestGroup(("a", "b"), 1, "screen"), 0)[-1]


def test_gpu_group_jobs_take_whole_nodes_and_their_gpus() -> None:
    # One rank per GPU needs the nodes' CPUs and, with ConstrainDevices, their GPU devices.
    jobs = jb.GroupJobs(
        "R", "/s", "standard", "res", ["v"], "nccl-multi-node", one_launcher=True, gpus_per_node=8
    )
    argv = jobs.sbatch_argv(TestGroup(("n1", "n2"), 2, "confirm"), 0)
    assert "--exclusive" in argv and "--gpus-per-node=8" in argv
    gloo = JOBS.sbatch_argv(TestGroup(("a", "b"), 1, "screen"), 0)
    assert "--exclusive" not in gloo and not any(a.startswith("--gpus") for a in gloo)


def test_scaling_sizes_and_round() -> None:
    assert rd.scaling_sizes(2) == [] and rd.scaling_sizes(3) == [3]
    assert rd.scaling_sizes(20) == [4, 8, 16, 20]
    head, log = Head(), rd.RunLog()
    rd.run_scaling(head, JOBS, ["c", "a", "b"], CONFIGS, log, 4, clock=lambda: 0, sleep=lambda _: None)
    assert [(r.round, r.purpose, r.nodes, r.figure) for r in log.records] == [
        (4, "scale", ["a", "b", "c"], 0.45)
    ]


# -- busbw against message size, per group (issue 11) ----------------------------------------

DATA = Path(__file__).resolve().parents[2] / "data"
GLOO_RANK0 = json.loads((DATA / "validators-report" / "groups" / "gloo-2node-sweep-rank0.json").read_text())


def nccl_report(capture: str, nodes: int) -> dict:
    """A nccl-multi-node report entry as the real check writes it from a captured nccl-tests run."""
    from validators.checks.nccl import judge_nccl
    from validators.config import parse_config
    from validators.result import Outcome

    root = Path(__file__).resolve().parents[3]
    cfg = parse_config(json.loads((root / "validators" / "examples" / "p5-node.json").read_text()), "quick")
    out = Outcome("nccl-multi-node")
    stdout = (DATA / "nccl-tests" / capture).read_text()
    judge_nccl(out, cfg, "all_reduce", nodes, f"all_reduce.{nodes}node", 0, stdout, "", ["all_reduce_perf"])
    return {"checks": [out.finish("ok").to_json()]}


def test_the_curve_of_a_captured_gloo_group_report_is_every_size_it_swept() -> None:
    assert figures.group_curve(GLOO_RANK0, "gloo-allreduce") == [
        [1048576.0, 0.3719], [4194304.0, 0.3462], [16777216.0, 0.4597], [67108864.0, 0.3721],
    ]  # fmt: skip
    assert figures.group_figure(GLOO_RANK0, "gloo-allreduce") == (0.4597, 16777216.0)  # judged size unchanged


def test_the_curve_of_a_nccl_group_report_is_every_row_of_its_run() -> None:
    report = nccl_report("mpirun_prefixed_eks_p5.txt", 2)
    curve = figures.group_curve(report, "nccl-multi-node")
    assert curve[-3:] == [[536870912.0, 279.0], [1073741824.0, 313.29], [2147483648.0, 437.79]]
    assert curve[0] == [67108864.0, 126.33] and len(curve) == 6  # the size-0 row has no x on a log axis
    # the figure stays the judged row: the worst at or above the threshold's 1 GiB (p5 example)
    assert figures.group_figure(report, "nccl-multi-node") == (313.29, 1073741824.0)


def test_a_report_without_a_series_gives_its_figure_as_one_point() -> None:
    old = {
        "checks": [
            {"id": "gloo-allreduce", "metrics": {"busbw": {"value": 0.44}, "message_bytes": {"value": 8}}}
        ]
    }
    assert figures.group_curve(old, "gloo-allreduce") == [[8.0, 0.44]]
    assert (
        figures.group_curve(None, "gloo-allreduce") == []
        and figures.group_curve(old, "nccl-multi-node") == []
    )
    broken = {"checks": [{"id": "gloo-allreduce", "metrics": {"busbw": {"value": 0.4}},
                          "series": {"busbw": {"points": [[0, 1], ["x", 2], [4, float("nan")], [8, 0.5], 3]}}}]}  # fmt: skip
    assert figures.group_curve(broken, "gloo-allreduce") == [[8.0, 0.5]]


class CurveHead(Head):
    """Rank 0 of every group writes the captured gloo report (figures scaled per group)."""

    def __init__(self, scale: dict[tuple[str, ...], float]) -> None:
        super().__init__()
        self.scale = scale

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        answer = super().__call__(argv, stdin)
        if argv[0] == "sbatch":
            nodes = tuple(sorted(expand_hostlist(argv[argv.index("-w") + 1])))
            folder = argv[argv.index("-o") + 1].rsplit("/", 1)[0]
            report = json.loads(json.dumps(GLOO_RANK0))
            check = report["checks"][0]
            k = self.scale[nodes]
            check["metrics"]["busbw"]["value"] *= k
            check["series"]["busbw"]["points"] = [[x, y * k] for x, y in check["series"]["busbw"]["points"]]
            self.files[f"{folder}/{nodes[0]}/report.json"] = json.dumps(report)
        return answer


def test_each_group_keeps_its_curve_and_the_file_has_the_median_per_group_size(tmp_path: Path) -> None:
    scale = {("a", "b"): 1.0, ("c", "d"): 3.0, ("e", "f"): 2.0, ("a", "b", "c", "d"): 0.5}
    head, log = CurveHead(scale), rd.RunLog()
    pairs = groups(("a", "b"), ("c", "d"), ("e", "f"))
    rd.run_round(head, JOBS, pairs, CONFIGS, log, clock=lambda: 0, sleep=lambda _: None)
    rd.run_round(head, JOBS, [TestGroup(("a", "b", "c", "d"), 2, "scale")], CONFIGS, log,
                 clock=lambda: 0, sleep=lambda _: None)  # fmt: skip
    assert [r.size for r in log.records] == [2, 2, 2, 4]
    assert log.records[1].curve[0] == [1048576.0, 0.3719 * 3]
    result = Planner(["a", "b"]).verdicts()
    data = json.loads(rd.write_groups_file(tmp_path, "R1", result, log).read_text())
    assert data["groups"][3]["size"] == 4 and data["groups"][3]["curve"][-1] == [67108864.0, 0.3721 * 0.5]
    two, four = data["by_size"]
    assert (two["nodes"], two["groups"], four["nodes"], four["groups"]) == (2, 3, 4, 1)
    assert two["busbw_median"] == 0.4597 * 2  # the median pair (scale 2)
    assert two["curve"] == [[x, y * 2] for x, y in GLOO_RANK0["checks"][0]["series"]["busbw"]["points"]]
    assert four["curve"][2] == [16777216.0, 0.4597 * 0.5]


# -- several collectives per group: each judged, one figure for the planner (issue 11) --------------

from clusterforge.certify.network.collectives import CollectiveReferences, collective_reason  # noqa: E402
from clusterforge.certify.network.planner import IsolationRules  # noqa: E402

NCCL3 = ("all_reduce", "all_gather", "alltoall")
HEALTHY = {"all_reduce": 380.0, "all_gather": 70.0, "alltoall": 60.0}


class CollectivesHead(Head):
    """Rank 0 writes a nccl-multi-node report with one figure per collective; ``slow`` holds the
    (node, collective) pairs that run at ``factor`` of healthy (a little noise on every figure)."""

    def __init__(self, slow: dict[tuple[str, str], float]) -> None:
        super().__init__()
        self.slow = slow

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        answer = super().__call__(argv, stdin)
        if argv[0] == "sbatch":
            nodes = sorted(expand_hostlist(argv[argv.index("-w") + 1]))
            folder = argv[argv.index("-o") + 1].rsplit("/", 1)[0]
            metrics = {}
            for i, (c, value) in enumerate(HEALTHY.items()):
                k = min([self.slow.get((n, c), 1.0) for n in nodes])
                noise = 1 + 0.01 * ((len(self.calls) + i) % 3 - 1)
                metrics[f"{c}.{len(nodes)}node.busbw"] = {
                    "value": round(value * k * noise, 2),
                    "unit": "GB/s",
                }
                metrics[f"{c}.{len(nodes)}node.message_bytes"] = {"value": 2**30, "unit": "B"}
            check = fake_reports.check("nccl-multi-node", "warn", metrics=metrics)
            self.files[f"{folder}/{nodes[0]}/report.json"] = json.dumps(
                fake_reports.report(nodes[0], [check])
            )
        return answer


def nccl_jobs(collectives: tuple[str, ...]) -> jb.GroupJobs:
    return jb.GroupJobs(
        "R",
        "/s",
        "standard",
        "res",
        ["v"],
        "nccl-multi-node",
        poll_s=0,
        one_launcher=True,
        collectives=collectives,
    )


def isolate_collectives(collectives: tuple[str, ...], slow: dict) -> tuple:
    nodes = [f"node-00{i}" for i in range(1, 9)]
    rules = IsolationRules(fail_gap=0.15, check="nccl-multi-node")
    return rd.run_isolation(CollectivesHead(slow), Planner(nodes, rules=rules), nccl_jobs(collectives),
                            CONFIGS, clock=lambda: 0, sleep=lambda _: None)  # fmt: skip


def test_only_alltoall_slow_on_one_node_fails_that_node_naming_alltoall(tmp_path: Path) -> None:
    result, log = isolate_collectives(NCCL3, {("node-007", "alltoall"): 0.6})
    assert result.failed() == ["node-007"] and result.node_verdicts["node-007"].kind == "node-fault"
    collective, line = collective_reason("nccl-multi-node", "node-007", log.records, 0.15)
    assert collective == "alltoall"
    assert line.startswith("nccl-multi-node: alltoall 3") and "GB/s with node-00" in line
    assert line.endswith(", 40 % under the reference 59.7 GB/s (2-node fleet median of 4)")
    assert collective_reason("nccl-multi-node", "node-001", log.records, 0.15) is None
    data = json.loads(rd.write_groups_file(tmp_path, "R", result, log).read_text())
    mine = [g for g in data["groups"] if "node-007" in g["nodes"]]
    assert mine and all(g["worst"]["collective"] == "alltoall" for g in mine)
    assert mine[0]["figures"]["all_reduce"] > 370  # its all_reduce alone would pass
    assert set(data["collective_references"]["2"]) == set(NCCL3)


def test_all_reduce_alone_does_not_see_a_slow_alltoall() -> None:
    result, log = isolate_collectives(("all_reduce",), {("node-007", "alltoall"): 0.6})
    assert result.failed() == [] and log.collectives is None and all(not r.figures for r in log.records)


def test_a_slow_all_reduce_is_judged_as_before_among_several_collectives() -> None:
    result, log = isolate_collectives(NCCL3, {("node-002", "all_reduce"): 0.5})
    assert result.failed() == ["node-002"]
    assert collective_reason("nccl-multi-node", "node-002", log.records, 0.15)[0] == "all_reduce"


def test_the_planner_figure_is_the_worst_ratio_in_the_primarys_unit() -> None:
    refs = CollectiveReferences(NCCL3, {("all_reduce", 2): 400.0, ("alltoall", 2): 60.0}, 0.15)
    figure, worst = refs.judge(2, {"all_reduce": 396.0, "all_gather": 10.0, "alltoall": 30.0})
    assert worst.collective == "alltoall" and figure == 400.0 * 0.5  # all_gather has no reference yet
    refs.update([(2, {"all_gather": v}) for v in (70.0, 71.0, 69.0)])
    assert (
        refs.judge(2, {"all_reduce": 396.0, "all_gather": 10.0, "alltoall": 60.0})[1].collective
        == "all_gather"
    )
    # a collective whose run gave no figure fails the group (fail closed); nothing at all: no result
    assert refs.judge(2, {"all_reduce": 396.0, "all_gather": 70.0, "alltoall": None})[0] == 0.0
    assert refs.judge(2, {}) == (None, None)
    # no reference for the primary yet: its own figure, the single-collective figure
    assert CollectiveReferences(NCCL3).judge(2, {"all_reduce": 396.0, "alltoall": 1.0}) == (396.0, None)


# -- the job's limits, environment and output (issue 22) ---------------------------------------------

NCCL3 = ("all_reduce", "all_gather", "alltoall")


def test_the_job_outlives_the_suites_own_bound_on_its_runs() -> None:
    """Before: -t 10 while each of 3 nccl-tests runs could take the standard profile's 3600 s: Slurm
    killed the job first, no report.json was written and the group read as 'no report'."""
    jobs = jb.GroupJobs(
        "R", "/s", "standard", "res", ["v"], "nccl-multi-node", one_launcher=True, collectives=NCCL3
    )
    config = jobs.member_config({"node": "a", "durations": {"burnin_seconds": 300}})
    bound = config["durations"]["workload_timeout_seconds"]
    assert config["durations"]["burnin_seconds"] == 300
    assert jobs.time_limit_min * 60 >= jobs.runs * bound + 60, "the suite ends a hung run before Slurm does"
    argv = jobs.sbatch_argv(TestGroup(("n1", "n2"), 1, "screen"), 0)
    assert argv[argv.index("-t") + 1] == str(jobs.time_limit_min) == "35"  # ceil((3 x 600 + 300) / 60)
    assert jobs.member_config({"durations": {"workload_timeout_seconds": 60}})["durations"] == {
        "workload_timeout_seconds": 60
    }  # a profile's lower bound stays
    assert jobs.deadline_s == 35 * 60 + jobs.pending_s


def test_efa_jobs_launch_with_the_open_mpi_environment_aws_uses() -> None:
    efa = jb.GroupJobs("R", "/s", "standard", "res", ["v"], "nccl-multi-node", one_launcher=True, efa=True)
    wrap = efa.sbatch_argv(TestGroup(("n1", "n2"), 1, "screen"), 0)[-1]
    assert wrap.startswith("env 'OMPI_MCA_pml=^ucx' OMPI_MCA_btl=tcp,self PMIX_MCA_gds=hash v run ")
    plain = jb.GroupJobs("R", "/s", "standard", "res", ["v"], "nccl-multi-node", one_launcher=True)
    assert plain.sbatch_argv(TestGroup(("n1", "n2"), 1, "screen"), 0)[-1].startswith("v run ")


class DyingHead(Head):
    """Jobs of `die` end without a report; their Slurm output holds what killed them."""

    def __init__(self, die: dict[str, str]) -> None:
        super().__init__()
        self.die = die

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        if argv[0] == "sbatch":
            nodes = expand_hostlist(argv[argv.index("-w") + 1])
            said = next((text for node, text in self.die.items() if node in nodes), None)
            if said is not None:
                self.calls.append(argv)
                job = str(100 + len(self.calls))
                self.files[argv[argv.index("-o") + 1].replace("%j", job)] = said
                return 0, f"{job}\n", ""
        return super().__call__(argv, stdin)


# slurmstepd's words when a job reaches its limit (src/slurmd/slurmstepd/req.c), and NCCL's own error.
TIME_LIMIT = (
    "slurmstepd: error: *** JOB 103 ON gpu-003 CANCELLED AT 2026-11-30T10:00:00 DUE TO TIME LIMIT ***"
)
NCCL_ERR = "gpu-003:1234:1290 [3] NCCL WARN NET/OFI Request error: Input/output error"


def test_a_job_that_left_no_report_records_what_its_output_said() -> None:
    head, log = DyingHead({"c": "line 1\n" + NCCL_ERR + "\n" + TIME_LIMIT + "\n"}), rd.RunLog()
    rd.run_round(head, JOBS, groups(("a", "b"), ("c", "d")), CONFIGS, log,
                 clock=lambda: 0, sleep=lambda _: None)  # fmt: skip
    done, died = log.records
    assert done.state == "done" and done.output == []
    assert (
        died.state
        == f"no report: Slurm ended the job at its {JOBS.time_limit_min} min time limit ({TIME_LIMIT})"
    )
    assert died.output == [NCCL_ERR, TIME_LIMIT]
    (cat,) = [c for c in head.calls if c[:3] == ["sh", "-c", jb.CAT_ROUND]]  # one read, by the round's glob
    assert '"$1"/r"$2"-g*/job-*.out' in jb.CAT_ROUND and "tail -c 4096" in jb.CAT_ROUND


def test_telling_lines_keep_the_errors_else_the_last_line() -> None:
    assert jb.telling_lines("a\nb\n\n") == ["b"]
    assert jb.telling_lines("x\n" + NCCL_ERR + "\ny\n") == [NCCL_ERR]
    assert jb.no_report([], JOBS) == "no report"


def test_with_several_collectives_a_dead_job_keeps_what_its_output_said() -> None:
    head, log = DyingHead({"c": NCCL_ERR + "\n"}), rd.RunLog()
    log.collectives = CollectiveReferences(NCCL3, {}, 0.15)
    jobs = jb.GroupJobs(
        "R1", "/shared", "quick", "res", ["v"], "nccl-multi-node", poll_s=0, collectives=NCCL3
    )
    rd.run_round(head, jobs, groups(("a", "b"), ("c", "d")), CONFIGS, log,
                 clock=lambda: 0, sleep=lambda _: None)  # fmt: skip
    assert log.records[1].state == f"no report: {NCCL_ERR}"


# -- at 4,096 nodes: what reaches the head grows with the nodes, not their square (issue 24) ------


class SizedHead(Head):
    """Keeps the largest stdin and argument it was sent, and the bytes of files written."""

    def __init__(self) -> None:
        super().__init__()
        self.stdin = self.arg = self.written = 0

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        self.stdin = max(self.stdin, len(stdin or ""))
        self.arg = max([self.arg, *(len(a) for a in argv)])
        if argv[:3] == ["python3", "-c", jb.WRITE_FILES]:
            self.written += len(stdin or "")
        return super().__call__(argv, stdin)


def scaling_payload(count: int) -> SizedHead:
    head, names = SizedHead(), [f"gpu-{i:04d}" for i in range(count)]
    big = jb.NodeConfigs(lambda n: {"node": n, "pins": ["x" * 2000]}, CONFIGS.address)
    rd.run_scaling(head, JOBS, names, big, rd.RunLog(), 2, clock=lambda: 0, sleep=lambda _: None)
    return head


def test_a_scaling_round_sends_each_node_once_and_one_member_list_per_group() -> None:
    small, large = scaling_payload(64), scaling_payload(256)
    # 4x the nodes: about 4x the bytes (a NODE.json per node + member lists of 4, 8, ... N), not 16x
    assert large.written / small.written < 4.5
    assert large.arg < 1000 and large.arg <= small.arg + 8  # no argument grows with the nodes
    member_lists = [p for p in large.files if p.endswith("/members.json")]
    assert len(member_lists) == len(rd.scaling_sizes(256))
    configs = [json.loads(t) for p, t in large.files.items() if "/nodes/" in p]
    assert len(configs) == 256 and not any("peers" in c for c in configs)


def test_node_configs_go_in_bounded_commands(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(jb, "MAX_STDIN", 10_000)
    head = scaling_payload(64)
    assert head.stdin < 10_000 + 2_200  # one file past the bound at most
    writes = [c for c in head.calls if c[:3] == ["python3", "-c", jb.WRITE_FILES]]
    assert len(writes) >= 64 * 2000 // 10_000


def test_the_job_reads_its_config_and_its_groups_member_list() -> None:
    argv = JOBS.sbatch_argv(TestGroup(("a", "b"), 3, "confirm"), 7)
    wrap = argv[-1]
    assert "--config /shared/.clusterforge/cert/R1/nodes/$SLURMD_NODENAME.json" in wrap
    assert "--peers-file /shared/.clusterforge/cert/R1/groups/r3-g7/members.json" in wrap


class DownHead(Head):
    """The controller stops once the round is submitted: squeue fails, ping says DOWN."""

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        if argv == ["scontrol", "ping"]:
            self.calls.append(argv)
            return 1, "Slurmctld(primary) at head is DOWN\n", ""
        if argv[0] == "squeue":
            self.calls.append(argv)
            return 1, "", "squeue: error: Unable to contact slurm controller (connect failure)"
        return super().__call__(argv, stdin)


def test_a_round_the_controller_was_away_for_judges_nobody() -> None:
    from clusterforge.slurm.admission import Admission, ControllerError

    head = DownHead(hang={"a"})
    planner = Planner(["a", "b", "c", "d"])
    with pytest.raises(ControllerError, match="is DOWN"):
        rd.run_isolation(head, planner, JOBS, CONFIGS, controller=Admission(head).check_controller,
                         clock=lambda: 0, sleep=lambda _: None)  # fmt: skip
    assert planner.records == []  # the round was not recorded: no node judged on it


def test_a_rounds_read_back_is_split_once_not_once_per_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """The round's text was split again for every job's output: jobs x text per round, the network
    step's exponent 1.26 at 4,096 nodes (benchmarks/workstation_scale.py)."""
    calls = []
    real = jb.sections
    monkeypatch.setattr(rd, "sections", lambda text: calls.append(1) or real(text))
    head = DyingHead({"c": NCCL_ERR + "\n", "e": NCCL_ERR + "\n"})
    rd.run_round(head, JOBS, groups(("a", "b"), ("c", "d"), ("e", "f")), CONFIGS, rd.RunLog(),
                 clock=lambda: 0, sleep=lambda _: None)  # fmt: skip
    assert len(calls) == 1


# -- group reports read through the report model (issue 25) --------------------------------------


class MalformedHead(Head):
    """Group c+d's rank 0 writes a report without ``profile`` (an old validators)."""

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        answer = super().__call__(argv, stdin)
        for path in [p for p in self.files if p.endswith("/c/report.json")]:
            data = json.loads(self.files[path])
            data.pop("profile", None)
            self.files[path] = json.dumps(data)
        return answer


def test_a_malformed_group_report_is_named_and_the_other_groups_keep_their_figures() -> None:
    head, log = MalformedHead(), rd.RunLog()
    found = rd.run_round(head, JOBS, groups(("a", "b"), ("c", "d")), CONFIGS, log,
                         clock=lambda: 0, sleep=lambda _: None)  # fmt: skip
    assert list(found.values()) == [0.45, None]
    state = log.records[1].state
    assert state.startswith("malformed report: /shared/.clusterforge/cert/R1/groups/r1-g1/c/report.json")
    assert "profile: Field required" in state and "fix: " in state
    assert [g.report.node for n in "abd" for g in log.reports[n]] == ["a", "b", "d"]  # typed, kept
    assert "c" not in log.reports and "profile" in log.malformed["c"][0]
