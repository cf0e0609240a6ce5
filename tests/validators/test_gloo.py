"""gloo-allreduce with peers: two nodes (two suites on this machine) meet over TCP, both must pass."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, tiny_cpu_config

pytest.importorskip("torch")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_with_peers_both_pass_and_rank_0_judges_busbw(tmp_path: Path) -> None:
    port = free_port()
    procs = {}
    for me, other in (("node-001", "node-002"), ("node-002", "node-001")):
        cfg = tiny_cpu_config(tmp_path)
        cfg.update(node=me, peers=[{"name": other, "address": "127.0.0.1"}], nccl={"port": port})
        cfg["thresholds"] = {"gloo.all_reduce.2node.busbw_gbps": 0.001}
        cfg["durations"]["peer_timeout_seconds"] = 60
        path = tmp_path / f"{me}.json"
        path.write_text(json.dumps(cfg))
        argv = [
            sys.executable,
            "-m",
            "validators",
            "run",
            "--profile",
            "quick",
            "--checks",
            "gloo-allreduce",
            "--config",
            str(path),
            "--out",
            str(tmp_path / me),
        ]
        procs[me] = subprocess.Popen(
            argv, cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    outputs = {me: p.communicate(timeout=180) for me, p in procs.items()}
    for me, p in procs.items():
        assert p.returncode == 0, (me, outputs[me])
    rank0 = json.loads((tmp_path / "node-001" / "report.json").read_text())["checks"][0]
    rank1 = json.loads((tmp_path / "node-002" / "report.json").read_text())["checks"][0]
    assert rank0["id"] == "gloo-allreduce" and rank0["status"] == "pass", rank0["summary"]
    assert rank0["metrics"]["ranks"]["value"] == 2 and rank0["metrics"]["busbw"]["value"] > 0
    assert rank0["threshold"] == {"gloo.all_reduce.2node.busbw_gbps": {"value": 0.001, "unit": "GB/s"}}
    assert rank1["status"] == "pass" and rank1["summary"].startswith("rank 1 of 2: all_reduce correct")


# -- the message-size sweep (issue 11: bandwidth against message size) -----------------------

WORKLOAD = ROOT / "validators" / "workloads" / "gloo_allreduce.py"


@pytest.mark.slow
def test_the_workload_reports_busbw_at_every_size_and_the_judged_one_at_the_top() -> None:
    argv = [sys.executable, str(WORKLOAD), "--bytes", "8192", "--sizes", "65536,4096,8192",
            "--iterations", "2", "--local-ranks", "2", "--timeout", "60"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert [row["bytes"] for row in result["sizes"]] == [4096, 8192, 65536]  # ascending, the judged size once
    assert all(row["busbw_gbps"] > 0 and row["wrong"] == 0 for row in result["sizes"])
    judged = result["sizes"][1]
    assert result["bytes"] == 8192 and result["busbw_gbps"] == judged["busbw_gbps"]
    assert result["ranks"] == 2 and result["wrong"] == 0


@pytest.mark.slow
def test_a_rank_still_running_at_the_deadline_is_stopped_and_named() -> None:
    """A starved node (e.g. 0.1 of a core) outlives the deadline: the error says so, no rank is
    left behind, instead of "exited with [None]" and a process the check waits on."""
    argv = [sys.executable, str(WORKLOAD), "--bytes", str(64 << 20), "--iterations", "100000",
            "--local-ranks", "2", "--timeout", "1", "--grace", "0"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout.strip().splitlines()[-1])["error"]
    assert error.startswith("local rank(s) [0, 1] of 2 still running after 1 s, stopped"), error


@pytest.mark.slow
def test_the_workload_keeps_bytes_alone_working_and_refuses_a_bad_size_list() -> None:
    argv = [sys.executable, str(WORKLOAD), "--bytes", "4096", "--iterations", "1", "--local-ranks", "2"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["bytes"] == 4096 and [r["bytes"] for r in result["sizes"]] == [4096]
    bad = subprocess.run(
        [*argv[:2], "--sizes", "1024,0", "--iterations", "1"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "every size must be an integer > 0" in bad.stderr


def _sweep_output(judged: int) -> str:
    """The workload's JSON for 2 local ranks at 1, 4 and 16 MiB (the shape the real run above
    prints; figures chosen so the judged size and the largest size judge differently)."""
    rows = [
        {"bytes": 1 << 20, "time_us": 9123.0, "algbw_gbps": 0.1149, "busbw_gbps": 0.1149, "wrong": 0},
        {"bytes": 4 << 20, "time_us": 21003.0, "algbw_gbps": 0.1997, "busbw_gbps": 0.1997, "wrong": 0},
        {"bytes": 16 << 20, "time_us": 61550.0, "algbw_gbps": 0.2726, "busbw_gbps": 0.2726, "wrong": 0},
    ]
    top = next(r for r in rows if r["bytes"] == judged)
    return json.dumps({"rank": 0, "ranks": 2, **top, "iterations": 5, "wrong": 0, "sizes": rows}) + "\n"


def _run_check(sizes: dict, thresholds: dict, answer: str) -> tuple[dict, list[str]]:
    from conftest import FakeRunner, load_example, make_context

    from validators.checks.gloo import GlooAllreduce

    cfg = load_example("cpu-node.json")
    cfg["sizes"] = sizes
    cfg["thresholds"] = thresholds
    runner = FakeRunner({(sys.executable,): (0, answer, "")})
    result = GlooAllreduce().run(make_context(cfg, runner)).to_json()
    return result, runner.calls[0]


def test_the_check_records_the_curve_and_judges_only_the_threshold_size() -> None:
    sweep = [1 << 20, 4 << 20, 16 << 20]
    result, argv = _run_check(
        {"gloo_bytes": 1 << 20, "gloo_sweep_bytes": sweep},
        {"gloo.all_reduce.1node.busbw_gbps": 0.25, "gloo.all_reduce.1node.message_bytes": 4 << 20},
        _sweep_output(4 << 20),
    )
    assert argv[argv.index("--bytes") + 1] == str(4 << 20)  # the threshold's size wins over gloo_bytes
    assert argv[argv.index("--sizes") + 1] == ",".join(map(str, sweep))
    assert result["series"] == {
        "busbw": {
            "x_unit": "B",
            "y_unit": "GB/s",
            "points": [[1 << 20, 0.1149], [4 << 20, 0.1997], [16 << 20, 0.2726]],
        }
    }
    # judged at 4 MiB: 0.1997 < 0.25 fails, although 16 MiB (0.2726) would pass
    assert result["metrics"]["busbw"] == {"value": 0.1997, "unit": "GB/s"}
    assert result["metrics"]["message_bytes"] == {"value": 4 << 20, "unit": "B"}
    assert result["status"] == "fail" and "busbw 0.1997 GB/s below 0.25 GB/s" in result["summary"]
    assert any(
        line.startswith("busbw by size: 1048576 B 0.1149 GB/s") for line in result["evidence"]["lines"]
    )


def test_an_empty_sweep_runs_the_judged_size_alone() -> None:
    result, argv = _run_check(
        {"gloo_bytes": 16 << 20, "gloo_sweep_bytes": []},
        {"gloo.all_reduce.1node.busbw_gbps": 0.01},
        _sweep_output(16 << 20).replace('"sizes"', '"unused"'),
    )
    assert "--sizes" not in argv and argv[argv.index("--bytes") + 1] == str(16 << 20)
    assert "series" not in result and result["status"] == "pass"
    assert result["metrics"]["busbw"]["value"] == 0.2726


# -- the timed span (a few ms-scale ops measure the scheduler's quantum, not the node) -------


def test_more_iterations_fill_the_least_timed_span_within_the_cap() -> None:
    from validators.workloads.gloo_allreduce import more_iterations

    assert more_iterations(0.25, 5, 1.0, 10000) == 15  # 50 ms per op: 15 more make 1 s
    assert more_iterations(0.25, 5, 1.0, 12) == 7  # no more than 12 in all
    assert more_iterations(1.2, 5, 1.0, 10000) == 0  # already long enough
    assert more_iterations(0.0, 5, 1.0, 100) == 95  # too fast to time: the cap
    assert more_iterations(0.25, 5, 0.0, 10000) == 0  # no least span asked for
    assert more_iterations(0.25, 20, 1.0, 10) == 0  # past the cap already: never negative


def test_the_check_asks_the_workload_for_the_profiles_least_timed_span() -> None:
    _, argv = _run_check({"gloo_bytes": 16 << 20}, {}, _sweep_output(16 << 20))
    assert argv[argv.index("--iterations") + 1] == "5"
    assert argv[argv.index("--min-seconds") + 1] == "1"  # quick's durations.gloo_min_seconds


@pytest.mark.slow
def test_every_rank_runs_the_iterations_the_least_timed_span_needs() -> None:
    """1 iteration asked, 0.3 s of timed span: more follow, the same count on both ranks (a rank
    that ran fewer would leave the other waiting in its collective until the timeout)."""
    argv = [sys.executable, str(WORKLOAD), "--bytes", "65536", "--sizes", "4096",
            "--iterations", "1", "--min-seconds", "0.3", "--local-ranks", "2", "--timeout", "60"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for row in result["sizes"]:
        assert row["iterations"] > 1 and row["time_us"] * row["iterations"] >= 0.3e6 * 0.9, row
    assert result["iterations"] == result["sizes"][1]["iterations"]  # the judged size's own count
    assert result["wrong"] == 0
