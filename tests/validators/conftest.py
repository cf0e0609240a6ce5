"""Shared helpers: a fake command runner fed with captured tool output, and node configs."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from validators.checks.base import Context
from validators.config import parse_config

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
EXAMPLES = ROOT / "validators" / "examples"

# nvidia-smi's own words when the kernel module is not loaded (tests/data/nvidia-smi/driver_not_loaded.txt,
# from lyulyul/shine-cluster issue 50); nvidia-smi prints it on stdout and exits 9.
NVSMI_NO_DRIVER_RC = 9


def captured(tool: str, name: str) -> str:
    """A captured real output from the parsers' tests/data (never edited here)."""
    return (DATA / tool / name).read_text(encoding="utf-8")


def nvsmi_no_driver_text() -> str:
    lines = captured("nvidia-smi", "driver_not_loaded.txt").splitlines()
    return "\n".join(line for line in lines if not line.startswith("$ ")) + "\n"


class FakeRunner:
    """Answers by argv prefix; records every call. Unknown commands are 'not found' (rc 127)."""

    def __init__(self, answers: dict[tuple[str, ...], tuple[int, str, str]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
        self.calls.append(list(argv))
        best = None
        for prefix, answer in self.answers.items():
            if tuple(argv[: len(prefix)]) == prefix and (best is None or len(prefix) > len(best[0])):
                best = (prefix, answer)
        if best is None:
            return 127, "", f"{argv[0]}: command not found"
        answer = best[1]
        if isinstance(answer, list):  # successive answers; the last one repeats
            return answer.pop(0) if len(answer) > 1 else answer[0]
        return answer


def load_example(name: str) -> dict:
    return json.loads((EXAMPLES / name).read_text())


def tiny_cpu_config(shared: Path) -> dict:
    """The example CPU node with durations and sizes small enough for the test budget."""
    cfg = load_example("cpu-node.json")
    cfg["shared_storage"] = {"path": str(shared), "require_mount": False}
    cfg["durations"] = {
        "burnin_seconds": 1,
        "gloo_iterations": 2,
        "gloo_min_seconds": 0,
        "checkpoint_steps": 4,
    }
    cfg["sizes"] = {
        "cpu_workers": 2,
        "cpu_matmul_dim": 64,
        "gloo_bytes": 1 << 20,
        "gloo_sweep_bytes": [1 << 16, 1 << 18, 1 << 20],
        "storage_test_bytes": 1 << 20,
        "checkpoint_width": 32,
        "checkpoint_bytes": 0,  # width alone: the tests check the restart, not the storage rate
    }
    return cfg


def gpu_config(**overrides: object) -> dict:
    cfg = copy.deepcopy(load_example("p5-node.json"))
    cfg.update(overrides)
    return cfg


def make_context(cfg: dict, runner: FakeRunner, profile: str = "quick") -> Context:
    return Context(parse_config(cfg, profile), profile, runner)


def run_cli(*args: str, env: dict[str, str] = None, timeout: float = 240) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "validators", *args],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def shared_dir(tmp_path: Path) -> Path:
    d = tmp_path / "shared"
    d.mkdir()
    return d
