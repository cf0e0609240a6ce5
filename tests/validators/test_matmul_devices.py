"""matmul-burnin's control flow on stand-in devices (workloads/matmul.py ``--device-type fake``).

The real check and the real runner run the real workload; only the device layer is a stand-in
(no torch): devices that fail before the start barrier, hang there, fail or die mid-run, hang
mid-run, or are slow. Each run is marked with an environment variable its workers inherit, so
the test counts the workload's processes left afterwards, whatever their parent.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import make_context, tiny_cpu_config

from validators.checks.burnin import MatmulBurnin
from validators.result import CheckResult
from validators.runner import RunResult, run_command
from validators.suite import run_check

pytestmark = pytest.mark.slow  # each run starts a parent and N spawned workers


class FakeDevices:
    """A runner that runs the check's real argv with the stand-in device layer and a marker."""

    def __init__(self, plan: str) -> None:
        self.plan = plan
        self.marker = uuid.uuid4().hex
        self.argv: list[str] = []
        self.seconds = 0.0

    def __call__(self, argv: Sequence[str], timeout: float) -> RunResult:
        args = list(argv)
        if "--device-type" not in args:  # telemetry or another tool: not on the CPU path
            return run_command(args, timeout)
        args[args.index("--device-type") + 1] = "fake"
        self.argv = [*args, "--fake-plan", self.plan]
        env = {**os.environ, "CLUSTERFORGE_TEST_MATMUL": self.marker}
        start = time.monotonic()
        result = run_command(self.argv, timeout, env=env)
        self.seconds = time.monotonic() - start
        return result

    def leftovers(self) -> list[int]:
        """Processes still running that carry this run's marker (zombies are gone)."""
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                environ = Path(f"/proc/{name}/environ").read_bytes()
                state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[-1].split()[0]
            except OSError:
                continue
            if f"CLUSTERFORGE_TEST_MATMUL={self.marker}".encode() in environ and state != "Z":
                found.append(int(name))
        return found


def burn(tmp_path: Path, plan: str, devices: int = 8, setup: float = 20) -> tuple[CheckResult, FakeDevices]:
    cfg = tiny_cpu_config(tmp_path)
    cfg["sizes"]["cpu_workers"] = devices
    cfg["durations"].update(burnin_seconds=1, matmul_setup_seconds=setup)
    runner = FakeDevices(plan)
    result = run_check(MatmulBurnin(), make_context(cfg, runner))  # type: ignore[arg-type]
    return result, runner


def failures(result: CheckResult) -> list[str]:
    return [line for line in result.evidence["lines"] if line.startswith("FAIL")] or [result.summary]


@pytest.mark.timeout(30)
def test_one_of_eight_devices_failing_before_the_barrier_fails_at_once_naming_it(tmp_path: Path) -> None:
    """Before: the other seven waited on the barrier and the parent on queue.get() without end
    (until the suite's timeout, 630-12,600 s), and the reason named no device."""
    result, run = burn(tmp_path, "3=fail-setup")
    assert result.status == "fail"
    assert result.summary.startswith(
        "device 3: RuntimeError: CUDA error: unspecified launch failure on device 3 (fake) (before the start)"
    )
    assert run.leftovers() == []
    print(f"failed in {run.seconds:.1f} s")  # the issue asks for < 30 s: the test's own timeout


def test_the_peers_of_a_failed_device_say_they_did_not_start(tmp_path: Path) -> None:
    result, run = burn(tmp_path, "0=fail-setup", devices=4)
    text = "\n".join(result.evidence["lines"])
    for i in (1, 2, 3):
        assert f"device {i}: did not start: a peer failed or was not ready in time" in text or (
            f"device {i}: stopped: another device failed" in text
        )
    assert run.leftovers() == []


def test_a_device_stuck_in_setup_is_named_at_the_setup_deadline_and_killed(tmp_path: Path) -> None:
    result, run = burn(tmp_path, "5=hang-setup", setup=5)
    assert result.status == "fail"
    assert "device 5: not ready within 5 s (stuck in CUDA init or allocation) (before the start)" in (
        result.summary + "\n".join(result.evidence["lines"])
    )
    assert run.leftovers() == []


def test_a_worker_killed_mid_run_is_named_with_its_signal(tmp_path: Path) -> None:
    """Before: a worker SIGKILLed (OOM-kill, segfault) never put a result, and the parent waited
    on queue.get() for it forever."""
    result, run = burn(tmp_path, "6=killed@5")
    assert result.status == "fail"
    assert "device 6: worker died without a result (signal 9 (SIGKILL)) during run (during the run)" in (
        result.summary + "\n".join(result.evidence["lines"])
    )
    assert run.leftovers() == []


def test_a_device_failing_mid_run_stops_the_others(tmp_path: Path) -> None:
    result, run = burn(tmp_path, "2=fail-run@4", devices=4)
    assert result.summary.startswith(
        "device 2: RuntimeError: CUDA error: an illegal memory access on device 2"
    )
    assert result.summary.endswith("(during the run)")
    assert run.leftovers() == []


def test_a_device_hung_mid_run_is_named_after_the_run_deadline(tmp_path: Path) -> None:
    # A setup grace of seconds, not 2 s: on a busy machine two spawned workers took longer to start
    # (CI, 2026-12-05: "device 0: not ready within 2 s"); the run deadline is the run plus that grace.
    result, run = burn(tmp_path, "1=hang-run@3", devices=2, setup=5)
    assert result.status == "fail"
    assert "device 1: no result 6 s after the start (hung) (during the run)" in (
        result.summary + "\n".join(result.evidence["lines"])
    )
    assert run.leftovers() == []


def test_healthy_stand_ins_pass_and_report_both_rates(tmp_path: Path) -> None:
    result, run = burn(tmp_path, "", devices=4)
    assert result.status == "pass", result.summary
    assert result.metrics["rate_with_check_median"]["value"] <= result.metrics["rate_median"]["value"]
    assert any(
        "(matmul alone; " in line and "with the comparison)" in line for line in result.evidence["lines"]
    )
    assert run.leftovers() == []


def test_a_slow_stand_in_fails_against_the_node_median(tmp_path: Path) -> None:
    cfg_plan = "2=slow"
    result, _ = burn(tmp_path, cfg_plan, devices=4)
    assert result.status == "fail"
    assert result.summary.startswith("device 2: ") and "below the node median" in result.summary


class _Proc:
    exitcode = None  # alive: the collector never reads a result off a dead worker here


class _Barrier:
    def abort(self) -> None:
        pass


def test_peers_that_gave_up_on_a_stuck_device_leave_it_stuck_in_setup_not_hung_in_the_run() -> None:
    """On a busy machine (CI, 2026-12-05) the seven ready peers gave up waiting on the barrier before
    the parent's setup deadline; counting them once as ready and once as done started the run clock,
    and device 5 read "hung during the run" instead of "not ready" (the test above failed so)."""
    import argparse
    import queue
    import threading

    from validators.workloads.matmul import Collector

    q: queue.Queue = queue.Queue()
    for i in range(7):
        q.put({"index": i, "ready": True})
    for i in range(7):
        q.put({"index": i, "stage": "setup", "after_peer": True, "error": "did not start: a peer failed"})
    args = argparse.Namespace(setup_seconds=0.5, seconds=0.2)
    collector = Collector([_Proc()] * 8, q, _Barrier(), threading.Event(), args)
    collector.collect()
    assert collector.results[7]["error"].startswith("not ready within 0.5 s"), collector.results[7]
    assert collector.results[7]["stage"] == "setup"
