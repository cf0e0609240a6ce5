"""Breakdown arithmetic on synthetic and recorded timings (clusterforge/benchmark/breakdown.py)."""

from __future__ import annotations

import pytest

from clusterforge.benchmark import breakdown
from clusterforge.benchmark.breakdown import PARTS, analyse, percentile, with_efficiency
from tests.benchmark.steps import rank, step

TOKENS = 512  # per rank per step


def test_one_rank_parts_sum_to_the_mean_step_and_compute_excludes_the_wait() -> None:
    r = rank(
        0,
        "node-001",
        [step(i, data=0.01, fwd=0.1, bwd=0.2, exposed=0.05, opt=0.02, overhead=0.004) for i in range(4)],
    )
    assert r.steps[0].backward == pytest.approx(0.25)  # what the workload records: compute, then the wait
    p = analyse([r], 1, TOKENS)
    parts = p.breakdown.parts
    assert parts["compute"] == pytest.approx(0.1 + 0.25 - 0.05)
    assert parts["exposed_comm"] == pytest.approx(0.05)
    assert parts["data_wait"] == pytest.approx(0.01)
    assert parts["optimizer"] == pytest.approx(0.02)
    assert parts["other"] == pytest.approx(0.004)
    assert sum(parts.values()) == pytest.approx(p.breakdown.step) == pytest.approx(0.384)
    assert p.step_median == pytest.approx(0.384)
    assert p.tokens_per_s == pytest.approx(TOKENS / 0.384)
    assert p.slow_rank is None


def test_warmup_steps_and_steps_missing_on_a_rank_are_not_measured() -> None:
    a = rank(0, "a", [step(0, fwd=9, warmup=True), step(1), step(2), step(3)])
    b = rank(1, "b", [step(0, fwd=9, warmup=True), step(1), step(2)])  # died before step 3
    p = analyse([a, b], 2, TOKENS)
    assert p.steps == 2
    assert p.breakdown.parts["compute"] == pytest.approx(0.3)


def test_the_critical_rank_is_the_last_to_arrive_and_its_wait_is_pure_communication() -> None:
    # rank 1 reads slowly; rank 0 waits for it in the all-reduce (its exposed time is mostly waiting)
    fast = rank(0, "a", [step(i, data=0.0, exposed=0.42) for i in range(5)])
    slow = rank(1, "b", [step(i, data=0.4, exposed=0.02) for i in range(5)])
    p = analyse([fast, slow], 2, TOKENS)
    parts = p.breakdown.parts
    assert parts["data_wait"] == pytest.approx(0.4)  # the slow rank's wait, once
    assert parts["exposed_comm"] == pytest.approx(0.02)  # not the fast rank's 0.42 of waiting
    stats = {s.rank: s for s in p.ranks_stats}
    assert stats[1].critical_share == 1.0 and stats[0].critical_share == 0.0


def test_ties_on_the_wait_go_to_the_rank_with_more_work() -> None:
    a = step(1, fwd=0.1, exposed=0.0)
    b = step(1, fwd=0.3, exposed=0.0)
    assert breakdown.critical_index([a, b]) == 1


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 95) == 19.0
    assert percentile(values, 50) == 10.0
    assert percentile(values, 100) == 20.0
    assert percentile([3.0], 95) == 3.0


def test_p95_and_median_of_the_critical_steps() -> None:
    steps = [step(i, overhead=0.0) for i in range(19)] + [step(19, ckpt=1.0)]
    p = analyse([rank(0, "a", steps)], 1, TOKENS)
    assert p.step_median == pytest.approx(0.31)
    assert p.step_p95 == pytest.approx(0.31)  # 19th of 20
    assert p.breakdown.parts["checkpoint"] == pytest.approx(1.0 / 20)  # amortised


def test_hidden_communication_fraction_from_gloo_bucket_spans() -> None:
    r = rank(0, "a", [step(i, exposed=0.02, comm=0.08) for i in range(3)])
    p = analyse([r], 1, TOKENS)
    assert p.comm_total == pytest.approx(0.08)
    assert p.comm_hidden == pytest.approx(0.75)
    nccl = analyse([rank(0, "a", [step(i, exposed=0.02) for i in range(3)])], 1, TOKENS)
    assert nccl.comm_total is None and nccl.comm_hidden is None


def test_scaling_efficiency_is_per_rank_throughput_against_one_node() -> None:
    one = analyse([rank(0, "a", [step(i) for i in range(3)])], 1, TOKENS)  # 0.31 s
    two = analyse([rank(0, "a", [step(i, exposed=0.1) for i in range(3)]),
                   rank(1, "b", [step(i, exposed=0.1) for i in range(3)])], 2, TOKENS)  # fmt: skip
    pts = with_efficiency([two, one])
    assert [p.nodes for p in pts] == [1, 2]
    assert pts[0].efficiency == pytest.approx(1.0)
    assert pts[1].efficiency == pytest.approx(0.31 / 0.41)
    assert pts[1].tokens_per_s == pytest.approx(2 * TOKENS / 0.41)


def test_no_single_node_run_means_no_efficiency() -> None:
    two = analyse([rank(0, "a", [step(1)]), rank(1, "b", [step(1)])], 2, TOKENS)
    assert with_efficiency([two])[0].efficiency is None


def test_mfu_needs_a_device_peak() -> None:
    r = [rank(0, "a", [step(i) for i in range(3)])]
    p = analyse(r, 1, TOKENS, flops_per_token=1e9, peak_flops_per_rank=989e12)
    assert p.mfu == pytest.approx(TOKENS / 0.31 * 1e9 / 989e12)
    assert analyse(r, 1, TOKENS).mfu is None


def test_a_cpu_capped_rank_is_the_slow_rank_by_compute() -> None:
    # node-002's rank computes 3x slower; the others wait for it (0.6 s exposed each step)
    ranks = [rank(k, f"node-00{k + 1}", [step(i, exposed=0.6) for i in range(5)]) for k in range(3)]
    ranks[1] = rank(1, "node-002", [step(i, fwd=0.3, bwd=0.6, exposed=0.01) for i in range(5)])
    p = analyse(ranks, 3, TOKENS)
    assert p.slow_rank is not None
    assert (p.slow_rank.rank, p.slow_rank.node, p.slow_rank.cause) == (1, "node-002", "compute")
    assert p.slow_rank.ratio == pytest.approx((0.3 + 0.6 + 0.01) / 0.31)
    assert p.breakdown.parts["compute"] == pytest.approx(0.9)  # the critical path is node-002's


def test_a_slow_storage_path_is_the_slow_rank_by_data_wait() -> None:
    ranks = [rank(0, "node-001", [step(i, exposed=0.5) for i in range(5)]),
             rank(1, "node-002", [step(i, data=0.5, exposed=0.01) for i in range(5)])]  # fmt: skip
    p = analyse(ranks, 2, TOKENS)
    assert p.slow_rank is not None and p.slow_rank.cause == "data_wait" and p.slow_rank.node == "node-002"


def test_noise_below_the_gap_names_no_slow_rank() -> None:
    jitter = (1.0, 1.1, 0.95, 1.2)  # up to 20 % apart: under the default 25 % gap
    ranks = [
        rank(k, f"n{k}", [step(i, fwd=0.1 * f, bwd=0.2 * f) for i in range(5)]) for k, f in enumerate(jitter)
    ]
    assert analyse(ranks, 4, TOKENS).slow_rank is None
    assert analyse(ranks, 4, TOKENS, slow_gap=0.1).slow_rank is not None


def test_analyse_refuses_runs_without_a_common_measured_step() -> None:
    with pytest.raises(ValueError, match="no measured step"):
        analyse([rank(0, "a", [step(0, warmup=True)])], 1, TOKENS)


def test_every_part_has_a_label() -> None:
    assert set(breakdown.LABELS) == set(PARTS)


def test_median_without_one_value_matches_the_plain_median() -> None:
    import random
    import statistics

    rng = random.Random(7)
    for n in (2, 3, 4, 5, 10, 11):
        values = sorted(rng.choice([0.1, 0.2, 0.3, 0.5, 0.9]) for _ in range(n))
        for k, v in enumerate(values):
            rest = values[:k] + values[k + 1 :]
            assert breakdown.median_without(values, v) == pytest.approx(statistics.median(rest))


def test_slow_rank_is_found_among_thousands_of_ranks() -> None:
    ranks = [rank(k, f"node-{k // 8:04d}", [step(i, exposed=0.3) for i in range(3)]) for k in range(4096)]
    ranks[1234] = rank(1234, "node-0154", [step(i, fwd=0.2, bwd=0.4, exposed=0.0) for i in range(3)])
    p = analyse(ranks, 512, TOKENS)
    assert p.slow_rank is not None and (p.slow_rank.rank, p.slow_rank.node) == (1234, "node-0154")
