"""Regressions against the last comparable run and the spec's gates (clusterforge/benchmark/compare.py)."""

from __future__ import annotations

from clusterforge.benchmark.compare import figures, gates, regressions
from clusterforge.spec.models import Benchmark


def doc(run: str, tps2: float, torch: str = "2.13.0", eff: float = 0.9) -> dict:
    return {
        "run_id": run,
        "software_set": {"torch": torch, "slurm_version": "22.05.8"},
        "train": {"points": [{"nodes": 1, "tokens_per_s": 1000.0, "efficiency": 1.0, "mfu": None},
                             {"nodes": 2, "tokens_per_s": tps2, "efficiency": eff, "mfu": None}]},
        "infer": {"points": [{"batch": 4, "tokens_per_s": 500.0}]},
        "data": {"rows": [{"workers": 1, "samples_per_s": 10.0}, {"workers": 2, "samples_per_s": 18.0}]},
    }  # fmt: skip


def test_figures_of_a_result() -> None:
    got = {k: f.value for k, f in figures(doc("a", 1800.0)).items()}
    assert got == {"train 1 node(s) tokens/s": 1000.0, "train 2 node(s) tokens/s": 1800.0,
                   "infer batch 4 tokens/s": 500.0, "data best samples/s": 18.0}  # fmt: skip
    assert figures({"train": {"points": [{"nodes": 1, "tokens_per_s": "x"}]}}) == {}


def test_a_drop_past_the_threshold_is_named_with_the_software_that_changed() -> None:
    (reg,) = regressions(doc("b", 1500.0, torch="2.14.0"), doc("a", 1800.0), 10)
    assert reg.key == "train 2 node(s) tokens/s" and round(reg.drop_pct) == 17
    assert reg.line == (
        "train 2 node(s) tokens/s: 1,500, 17 % under 1,800 in run a (threshold 10 %); software changed: torch 2.13.0 -> 2.14.0"
    )
    assert regressions(doc("b", 1700.0), doc("a", 1800.0), 10) == []  # 6 %: noise
    assert regressions(doc("b", 100.0), None, 10) == []


def test_gates_pass_and_fail_with_their_figures() -> None:
    settings = Benchmark(min_scaling_efficiency=0.8, fail_on_regression=True)
    low = doc("b", 1500.0, eff=0.75)
    found = regressions(low, doc("a", 1800.0), 10)
    eff, reg = gates(settings, low["train"]["points"], found)
    assert (eff.name, eff.passed) == ("min_scaling_efficiency", False)
    assert eff.line == "min_scaling_efficiency 0.8: 2 nodes 0.75 (under)"
    assert (reg.name, reg.passed) == ("fail_on_regression", False)
    ok = gates(settings, doc("c", 1800.0)["train"]["points"], [])
    assert all(g.passed for g in ok)
    assert gates(Benchmark(), low["train"]["points"], found) == []  # no gate set: none judged


def test_a_gate_without_figures_fails_closed() -> None:
    (eff, mfu) = gates(
        Benchmark(min_scaling_efficiency=0.8, min_mfu=0.3), [{"nodes": 1, "efficiency": 1.0, "mfu": None}], []
    )
    assert not eff.passed and "no training run above one node" in eff.line
    assert not mfu.passed and "GPU nodes only" in mfu.line
