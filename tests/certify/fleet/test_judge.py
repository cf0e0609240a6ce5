"""Fleet judging on simulated fleets (thousands of nodes, realistic noise, outliers at known gaps)
and on the small and odd cases: 1-2 nodes, no reference, a slow batch, a bad baseline, MAD = 0."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clusterforge.catalog import load_hardware
from clusterforge.certify.fleet.baseline import Baseline, BaselineError, BaselineStore, Sample
from clusterforge.certify.fleet.judge import FleetJudgement, MetricVerdict, judge_run
from clusterforge.certify.fleet.metrics import check_figures, report_figures
from tests.certify.fleet.fleet_sim import MATMUL, fleet, report

HW = load_hardware()
CAPTURED = Path(__file__).resolve().parents[2] / "data" / "validators-report"
P5 = 780.0  # TFLOP/s: a healthy H100 in a large bf16 matmul (MAMF 794.5, catalogue floor 640)


def judge(reports: dict, kind: str = "local", **kwargs: object) -> FleetJudgement:
    return judge_run(reports, dict.fromkeys(reports, kind), catalog=HW, **kwargs)  # type: ignore[arg-type]


def matmul(j: FleetJudgement, node: str) -> MetricVerdict:
    return next(m for m in j.nodes[node].metrics if m.metric == "matmul-burnin.rate")


def baseline_of(value: float, versions: dict[str, str] | None = None, n: int = 12) -> Baseline:
    b = Baseline("local", "local")
    for i in range(n):
        b.add("matmul-burnin.rate", "GFLOP/s", True, Sample(value, f"old-{i}", "r0", "t", versions or {}))
    return b


# --- which figures a report gives -----------------------------------------------------------


def test_a_nodes_matmul_figure_is_its_worst_device_and_the_median_is_not_judged_twice() -> None:
    figures = report_figures(report("n1", matmul=[46.0, 12.5, 45.0]))
    assert figures["matmul-burnin.rate"].value == 12.5 and figures["matmul-burnin.rate"].detail == "device 1"
    assert "matmul-burnin.rate_median" not in figures
    assert set(figures) == {"matmul-burnin.rate", "shared-storage.write_rate", "shared-storage.read_rate"}


def test_cpu_workers_matmul_figure_is_their_median_not_the_slowest_worker() -> None:
    # Local stack, 2026-12-06: a healthy node certified alone, its two workers 24.4 and 30.1 GFLOP/s
    # (the check's own threshold keys say CPU workers, which time-share the node's cores).
    check = report("n1", matmul=[24.432, 30.102])["checks"][0]
    check["threshold"] = {"matmul.cpu_median_gap_pct": {"value": 50.0, "unit": "%"}}
    check["metrics"]["rate_median"]["value"] = 27.267
    check["metrics"]["rate_with_check_median"] = {"value": 22.815, "unit": "GFLOP/s"}
    figures = {f.metric: f for f in check_figures(check)}
    assert figures["matmul-burnin.rate"].value == 27.267
    assert figures["matmul-burnin.rate"].detail == "median of the workers"
    assert figures["matmul-burnin.rate_with_check_median"].value == 22.815  # a node figure, judged as before
    # GPUs: one bad GPU is a bad node, whatever the median
    check["threshold"] = {"matmul.median_gap_pct": {"value": 7.0, "unit": "%"}}
    assert {f.metric: f for f in check_figures(check)}["matmul-burnin.rate"].value == 24.432


def test_multi_node_counts_derived_and_malformed_metrics_are_not_figures() -> None:
    gloo_peers = {
        "id": "gloo-allreduce",
        "metrics": {"busbw": {"value": 1.2, "unit": "GB/s"}, "algbw": {"value": 1.2, "unit": "GB/s"}},
        "threshold": {"gloo.all_reduce.2node.busbw_gbps": {"value": 0.05, "unit": "GB/s"}},
    }
    assert check_figures(gloo_peers) == []
    gloo_local = {
        **gloo_peers,
        "threshold": {"gloo.all_reduce.1node.busbw_gbps": {"value": 0.01, "unit": "GB/s"}},
    }
    assert [f.metric for f in check_figures(gloo_local)] == ["gloo-allreduce.busbw"]
    assert (
        check_figures(
            {"id": "nccl-multi-node", "metrics": {"all_reduce.2node.busbw": {"value": 300, "unit": "GB/s"}}}
        )
        == []
    )
    odd = {
        "id": "some-new-check",
        "metrics": {
            "tokens": {"value": 9000.0, "unit": "tokens/s"},  # any throughput is judged
            "step_time": {"value": 12.0, "unit": "ms"},  # a time: lower is better
            "count": {"value": 3, "unit": "count"},
            "nan": {"value": float("nan"), "unit": "GB/s"},
            "none": {"value": None, "unit": "GB/s"},
            "flag": {"value": True, "unit": "GB/s"},
            "text": {"value": "fast", "unit": "GB/s"},
            "ratio": {"value": 0.5, "unit": "ratio"},
        },
    }
    figures = {f.metric: f for f in check_figures(odd)}
    assert set(figures) == {"some-new-check.tokens", "some-new-check.step_time"}
    assert not figures["some-new-check.step_time"].higher_is_better
    broken = {
        "checks": [
            {
                "id": "matmul-burnin",
                "status": "error",
                "metrics": {"rate_device_0": {"value": 1, "unit": "GFLOP/s"}},
            },
            "junk",
        ]
    }
    assert report_figures(broken) == {}
    assert report_figures({"checks": "nope"}) == {}


@pytest.mark.parametrize("case", sorted(p.stem for p in CAPTURED.glob("*.json")))
def test_figures_of_a_real_validators_report(case: str) -> None:
    data = json.loads((CAPTURED / f"{case}.json").read_text())
    figures = report_figures(data)
    (burnin,) = [c for c in data["checks"] if c["id"] == "matmul-burnin"]
    devices = {k: v["value"] for k, v in burnin["metrics"].items() if k.startswith("rate_device_")}
    cpu = any(k.startswith("matmul.cpu_") for k in burnin["threshold"])  # CPU workers: their median
    expected = burnin["metrics"]["rate_median"]["value"] if cpu else min(devices.values())
    assert figures["matmul-burnin.rate"].value == expected
    assert {"gloo-allreduce.busbw", "shared-storage.write_rate", "shared-storage.read_rate"} <= set(figures)
    assert {"checkpoint-restart.ckpt_write_rate", "checkpoint-restart.ckpt_read_rate"} <= set(figures)
    assert not any(m.endswith(("algbw", "rate_median", "plain_write_rate", "ratio")) for m in figures)


# --- rules on simulated fleets ----------------------------------------------------------------


def test_thousand_node_gpu_fleet_catches_outliers_at_known_gaps_and_spares_healthy_nodes() -> None:
    gaps = {f"node-{i:05d}": [5.0, 10.0, 20.0, 50.0][(i - 1) // 10] for i in range(1, 41)}
    # one device per node: the node figure's noise is the device's (the worst-of-8 shift is the
    # same for every node, so the fleet median moves with it; tested above)
    reports = fleet(
        1200, sd=0.015, outliers=gaps, healthy=P5, instance_type="p5.48xlarge", unit="TFLOP/s", devices=1
    )
    j = judge(reports, "p5.48xlarge")
    for node, gap in gaps.items():
        m = matmul(j, node)
        assert m.reference_kind == "fleet"
        assert m.status in (("warn", "fail") if gap == 5.0 else ("fail",)), (node, m.line)
        if gap >= 10:
            assert j.nodes[node].failing[0][0] == "matmul-burnin"
    healthy = [v for n, v in j.nodes.items() if n not in gaps]
    assert all(v.passed for v in healthy), [v.failing for v in healthy if not v.passed][:3]
    warned = sum(1 for v in healthy if any(w.startswith("matmul-burnin") for w in v.warnings))
    assert warned <= 0.02 * len(healthy), warned  # 3.5 % is 2.3 sd at 1.5 % noise: ~1 % warn


def test_robust_z_warns_in_a_tight_fleet_where_the_gap_alone_would_not() -> None:
    reports = fleet(
        1000, sd=0.002, outliers={"node-00007": 2.5}, healthy=P5, instance_type="p5.48xlarge", unit="TFLOP/s"
    )
    j = judge(reports, "p5.48xlarge")
    m = matmul(j, "node-00007")
    assert m.gap_pct is not None and m.gap_pct < 3.5  # under the warn gap ...
    assert m.z is not None and m.z <= -3 and m.status == "warn"  # ... but far out of the pack
    assert "robust z" in m.line


def test_z_is_not_computed_when_mad_is_zero() -> None:
    reports = {f"n{i:02d}": report(f"n{i:02d}", matmul=[MATMUL]) for i in range(12)}
    reports["n99"] = report("n99", matmul=[MATMUL * 0.95])  # 5 % under: inside local's 15 % warn gap
    j = judge(reports)
    m = matmul(j, "n99")
    assert m.z is None and m.status == "pass"
    group = next(g for g in j.groups if g.metric == "matmul-burnin.rate")
    assert group.mad == 0 and "MAD is 0" in group.note


def test_the_cpu_capped_node_of_issue_10_gets_a_one_line_reason_with_its_evidence() -> None:
    reports = {
        "node-001": report("node-001", matmul=[46.2]),
        "node-002": report("node-002", matmul=[46.8]),
        "node-003": report("node-003", matmul=[47.2]),
        "node-004": report("node-004", matmul=[11.4]),
    }
    j = judge(reports)
    assert [n for n, v in j.nodes.items() if not v.passed] == ["node-004"]
    check_id, reason = j.nodes["node-004"].failing[0]
    assert check_id == "matmul-burnin"
    assert reason == "11.4 GFLOP/s (device 0), 75 % under the fleet median 46.5 (4 local nodes)"
    assert len(f"clusterforge: {check_id}: {reason}") < 150


def test_a_slow_batch_is_judged_against_the_baseline_never_healthy_because_all_agree() -> None:
    reports = fleet(30, sd=0.01, scale=0.3)  # every node 70 % slow
    alone = judge(reports)
    assert all(v.passed for v in alone.nodes.values())  # all agree, nothing stored: only the floor
    j = judge(reports, baselines={"local": baseline_of(MATMUL)})
    assert not any(v.passed for v in j.nodes.values())
    m = matmul(j, "node-00001")
    assert m.reference_kind == "baseline" and m.reference == MATMUL
    assert "under the baseline 46.5" in m.line and "the fleet median" in m.note


def test_a_slow_gpu_batch_with_no_baseline_falls_to_the_floor() -> None:
    reports = fleet(20, sd=0.01, healthy=600.0, instance_type="p5.48xlarge", unit="TFLOP/s")  # floor 640
    j = judge(reports, "p5.48xlarge")
    m = matmul(j, "node-00003")
    assert m.reference_kind == "floor" and m.status == "fail"
    assert "under the floor 640 (matmul.tflops_min)" in m.line


# --- small fleets --------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2])
def test_one_or_two_nodes_are_judged_against_the_baseline(n: int) -> None:
    reports = {f"n{i}": report(f"n{i}", matmul=[MATMUL * (0.25 if i == 0 else 1.0)]) for i in range(n)}
    j = judge(reports, baselines={"local": baseline_of(MATMUL)})
    slow = matmul(j, "n0")
    assert slow.reference_kind == "baseline" and slow.status == "fail"
    assert "75 % under the baseline 46.5 (12 earlier local samples)" in slow.line
    if n == 2:
        assert matmul(j, "n1").status == "pass"


def test_no_baseline_means_the_floor_and_no_floor_means_unjudged() -> None:
    j = judge({"n1": report("n1", matmul=[0.5], write=120.0)})
    m = matmul(j, "n1")
    assert (
        m.reference_kind == "floor"
        and m.status == "fail"
        and "under the floor 1.00 (matmul.cpu_gflops_min)" in m.line
    )
    write = next(x for x in j.nodes["n1"].metrics if x.metric == "shared-storage.write_rate")
    assert write.reference_kind == "none" and write.status == "unjudged" and "not judged" in write.line


# --- bad or foreign baselines ------------------------------------------------------------------


def test_a_corrupt_baseline_file_is_named_and_judging_goes_on_with_the_floor(tmp_path: Path) -> None:
    store = BaselineStore("local", root=tmp_path)
    store.path("local").parent.mkdir(parents=True)
    store.path("local").write_text("{not json")
    j = judge({"n1": report("n1", matmul=[40.0])}, baselines=store)
    m = matmul(j, "n1")
    assert m.reference_kind == "floor" and m.status == "pass"
    assert str(store.path("local")) in m.note and "not a usable baseline" in m.note
    assert j.notes and j.nodes["n1"].notes == j.notes


def test_a_baseline_of_other_software_versions_is_not_applied_unless_the_profile_says_so() -> None:
    old = {"local": baseline_of(MATMUL, {"slurm": "23.02.1"})}
    now = {"local": {"slurm": "22.05.8"}}
    slow = {"n1": report("n1", matmul=[10.0])}
    j = judge(slow, baselines=old, versions=now)
    m = matmul(j, "n1")
    assert m.reference_kind == "floor" and m.status == "pass"
    assert "other software versions (slurm 23.02.1 in the baseline, 22.05.8 now), not applied" in m.note
    j = judge(slow, baselines=old, versions=now, across_versions={"local": True})
    m = matmul(j, "n1")
    assert m.reference_kind == "baseline" and m.status == "fail" and "applied by the profile" in m.note
    assert "other software versions" in m.line


def test_a_profile_override_moves_the_gaps() -> None:
    reports = {f"n{i}": report(f"n{i}", matmul=[MATMUL]) for i in range(5)}
    reports["slow"] = report("slow", matmul=[MATMUL * 0.3])  # 70 % under
    assert matmul(judge(reports), "slow").status == "fail"  # local's catalogue fail gap: 25 %
    j = judge(reports, overrides={"local": {"fleet.matmul-burnin.rate.fail_gap_pct": 80}})
    m = matmul(j, "slow")
    assert m.status == "warn"
    group = next(g for g in j.groups if g.metric == "matmul-burnin.rate")
    assert "fleet.matmul-burnin.rate.fail_gap_pct" in group.rules.source
    assert group.fail_at == pytest.approx(MATMUL * 0.2)


def test_a_metric_with_its_own_catalogue_gaps() -> None:
    # local's shared-disk storage rates are judged at 90 % (catalogue), matmul at 25 %
    def with_write(node: str, rate: float) -> dict:
        return report(node, write=rate)

    reports = {f"n{i}": with_write(f"n{i}", 200.0) for i in range(4)}
    reports["half"] = with_write("half", 40.0)  # 80 % under: warned, not failed, on a shared disk
    reports["stuck"] = with_write("stuck", 2.0)  # 99 % under: a throttled path
    j = judge(reports)
    by = {
        n: next(m for m in v.metrics if m.metric == "shared-storage.write_rate") for n, v in j.nodes.items()
    }
    assert by["half"].status == "warn" and by["stuck"].status == "fail"
    group = next(g for g in j.groups if g.metric == "shared-storage.write_rate")
    assert "own gaps" in group.rules.source


def test_a_time_metric_is_judged_lower_is_better() -> None:
    def with_latency(node: str, us: float) -> dict:
        r = report(node)
        r["checks"].append(
            {"id": "rpc", "status": "pass", "metrics": {"latency": {"value": us, "unit": "us"}}}
        )
        return r

    reports = {f"n{i}": with_latency(f"n{i}", 100.0) for i in range(4)}
    reports["slow"] = with_latency("slow", 200.0)
    m = next(x for x in judge(reports).nodes["slow"].metrics if x.metric == "rpc.latency")
    assert m.status == "fail" and re.search(r"100 % over the fleet median 100", m.line)


def test_unusable_baseline_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "local.json"
    path.write_text(
        json.dumps(
            {
                "schema": "clusterforge-baseline",
                "schema_version": 1,
                "instance_type": "p5.48xlarge",
                "metrics": {},
            }
        )
    )
    store = BaselineStore("s", root=tmp_path)
    store.dir.mkdir(parents=True)
    (store.dir / "local.json").write_text(path.read_text())
    with pytest.raises(
        BaselineError,
        match=r"local\.json: not a usable baseline \(it is the baseline of instance type 'p5.48xlarge'",
    ):
        store.load("local")


def test_fleet_inputs_from_the_local_spec() -> None:
    from clusterforge.certify.fleet.inputs import fleet_inputs
    from clusterforge.spec.loader import load_spec, stack_path

    spec, _ = load_spec(stack_path("local"))
    inputs = fleet_inputs(spec, catalog=HW)
    assert set(inputs.overrides) == {"local"} and inputs.across_versions == {"local": False}
    assert inputs.versions["local"]["slurm"] == spec.software.slurm
    profiles = dict(spec.certification.profiles)
    profiles["local"] = profiles["local"].model_copy(
        update={"thresholds": {"fleet.fail_gap_pct": 50.0}, "baseline_across_versions": True}
    )
    changed = spec.model_copy(
        update={"certification": spec.certification.model_copy(update={"profiles": profiles})}
    )
    inputs = fleet_inputs(changed, catalog=HW)
    assert inputs.overrides == {"local": {"fleet.fail_gap_pct": 50.0}} and inputs.across_versions == {
        "local": True
    }
