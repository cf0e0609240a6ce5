"""Workload sizes per node type and the refusal of sizes that cannot fit (clusterforge/benchmark/sizing.py)."""

from __future__ import annotations

import pytest

from clusterforge.benchmark.sizing import SizeError, parameter_count, sizes_for, train_memory_bytes
from clusterforge.catalog import load_hardware
from clusterforge.spec.models import Benchmark

HW = load_hardware()


def bench(**train: object) -> Benchmark:
    return Benchmark.model_validate({"train": train})


def test_container_nodes_get_a_few_mb_model_one_thread_and_gloo_ranks() -> None:
    s = sizes_for(Benchmark(), HW["local"])
    assert s.device == "cpu" and s.dtype == "fp32" and s.ranks_per_node == 1
    assert 0.5e6 < parameter_count(s.model) < 4e6  # a few MB in fp32
    assert s.train["threads"] == 1 and any("share the host's cores" in n for n in s.notes)
    assert s.data["sample_bytes"] == 64 * 1024


def test_gpu_nodes_get_a_few_hundred_mb_model_one_rank_per_gpu_in_bf16() -> None:
    s = sizes_for(Benchmark(), HW["p5.48xlarge"])
    assert s.device == "cuda" and s.dtype == "bf16" and s.ranks_per_node == 8
    assert 100e6 < parameter_count(s.model) < 500e6


def test_spec_keys_override_the_preset() -> None:
    s = sizes_for(bench(layers=3, micro_batch=2, threads=2), HW["local"])
    assert s.model["layers"] == 3 and s.train["micro_batch"] == 2 and s.train["threads"] == 2


def test_a_size_that_cannot_fit_is_refused_with_the_micro_batch_that_would() -> None:
    with pytest.raises(SizeError) as err:
        sizes_for(bench(micro_batch=256), HW["p5.48xlarge"])
    text = str(err.value)
    assert text.startswith("benchmark.train: ")
    assert (
        "at micro_batch 256 need about" in text
        and "one H100 of p5.48xlarge (80 GiB) allows 72.0 GiB (90%)" in text
    )
    fits = int(text.rsplit("micro_batch ", 1)[1].split()[0])
    model = sizes_for(Benchmark(), HW["p5.48xlarge"]).model
    assert (
        train_memory_bytes(model, fits, False)
        <= 0.9 * 80 * 2**30
        < train_memory_bytes(model, fits + 1, False)
    )


def test_when_not_even_one_sequence_fits_it_names_the_layers_that_would() -> None:
    with pytest.raises(SizeError, match=r"not even micro_batch 1 fits; layers \d+ at micro_batch 1 would"):
        sizes_for(bench(d_model=8192, heads=64, layers=200, micro_batch=1), HW["p5.48xlarge"])


def test_inconsistent_sizes_are_refused_with_the_fix() -> None:
    with pytest.raises(SizeError, match="d_model 100 is not a multiple of heads 3: .* e.g. 2"):
        sizes_for(bench(d_model=100, heads=3), HW["local"])
    with pytest.raises(SizeError, match="exceed the model's seq_len 64"):
        sizes_for(Benchmark.model_validate({"infer": {"prompt_tokens": 60, "new_tokens": 10}}), HW["local"])
    with pytest.raises(SizeError, match="sample_kib 12 would"):
        sizes_for(
            Benchmark.model_validate({"train": {"seq_len": 4096}, "data": {"sample_kib": 4}}), HW["local"]
        )


def test_the_spec_refuses_unknown_keys_and_odd_sample_sizes() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="extra"):
        Benchmark.model_validate({"min_scaling_effciency": 0.8})
    with pytest.raises(ValidationError, match="multiple of 4"):
        Benchmark.model_validate({"data": {"sample_kib": 6}})
