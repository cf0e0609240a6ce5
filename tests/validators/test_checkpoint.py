"""checkpoint-restart really trains, really SIGKILLs and really resumes (CPU, torch, gloo-free world size 1).

The passing run is in test_cli.py (the quick profile on the CPU node); here the resume is
broken on purpose with the test-only knob and the check must catch it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FakeRunner, make_context, tiny_cpu_config

from validators.checks.checkpoint import CheckpointRestart
from validators.suite import run_check

pytest.importorskip("torch")


@pytest.mark.slow
def test_resume_that_drops_the_optimizer_state_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VALIDATORS_TEST_FAULT", "drop-optimizer")
    cfg = tiny_cpu_config(tmp_path)
    result = run_check(CheckpointRestart(), make_context(cfg, FakeRunner({})))
    assert result.status == "fail", result.summary
    # The first step after the resume still uses the saved weights; the optimizer's moments
    # are gone, so from the second step on the losses and every tensor differ.
    assert result.summary.startswith("loss at step 4 differs after resume")
    assert "optim" in result.summary and "param" in result.summary
    assert result.metrics["killed_rc"]["value"] == -9  # the kill did happen
    assert any(line.startswith("shard __0_0.distcp: sha256 ") for line in result.evidence["lines"])
    assert list(tmp_path.iterdir()) == []  # checkpoint folder cleaned up


def test_bad_save_step_fails_without_running(tmp_path: Path) -> None:
    cfg = tiny_cpu_config(tmp_path)
    cfg["durations"]["checkpoint_save_step"] = 4
    result = run_check(CheckpointRestart(), make_context(cfg, FakeRunner({})))
    assert result.status == "fail"
    assert "checkpoint_save_step = 4 must be between 1 and checkpoint_steps - 1 (3)" in result.summary


def test_width_for_bytes_sizes_the_model_to_the_checkpoint() -> None:
    from validators.checks.checkpoint import width_for_bytes

    assert width_for_bytes(0) == 0
    assert width_for_bytes(256 << 20) == 3345  # 24 w^2 ~ 256 MiB
    assert width_for_bytes(1 << 30) == 6689


@pytest.mark.slow
def test_checkpoint_bytes_sets_the_size_and_the_ratio_floors_judge_it(tmp_path: Path) -> None:
    """A 4 MiB checkpoint (sizes.checkpoint_bytes) comes out within 5 % of it, and an unreachable
    write-ratio floor fails with the figure; the old fixed width could not reach that size."""
    cfg = tiny_cpu_config(tmp_path)
    cfg["sizes"]["checkpoint_bytes"] = 4 << 20
    cfg["thresholds"] = {**cfg.get("thresholds", {}), "checkpoint.write_ratio_min": 1000.0}
    result = run_check(CheckpointRestart(), make_context(cfg, FakeRunner({})))
    size = result.metrics["ckpt_bytes"]["value"]
    assert abs(size - (4 << 20)) / (4 << 20) < 0.05, size
    assert result.status == "fail"
    assert result.summary.startswith(
        "checkpoint write rate is "
    ) and "plain sequential write, below 1000" in (result.summary)
    assert result.threshold["checkpoint.write_ratio_min"]["value"] == 1000.0
    for name in ("ckpt_write_rate", "ckpt_read_rate", "plain_write_rate", "plain_read_rate"):
        assert result.metrics[name]["value"] > 0


@pytest.mark.slow
def test_the_corrupt_checkpoint_hook_is_caught_as_a_changed_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = tmp_path / "faults"
    faults.mkdir()
    (faults / "corrupt-checkpoint").write_text("")
    monkeypatch.setenv("VALIDATORS_FAULT_DIR", str(faults))
    shared = tmp_path / "shared"
    shared.mkdir()
    result = run_check(CheckpointRestart(), make_context(tiny_cpu_config(shared), FakeRunner({})))
    assert result.status == "fail"
    assert "checkpoint shard __0_0.distcp changed on " in result.summary
    assert "between save and resume (sha256 " in result.summary
    assert any(line.startswith("FAULT INJECTION ACTIVE") for line in result.evidence["lines"])
