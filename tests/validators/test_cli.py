"""The command line, end to end, as other tools call it (subprocess, real runner)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from conftest import DATA, ROOT, gpu_config, run_cli, tiny_cpu_config

SCHEMA = json.loads((ROOT / "validators" / "report.schema.json").read_text())
GPU_ONLY = {
    "gpu-inventory",
    "gpu-health",
    "pcie-link",
    "nvlink",
    "gpu-topology",
    "xid-scan",
    "gpu-throttle",
    "nccl-single-node",
}
CPU_RAN = {
    "python-runtime",
    "software-versions",
    "shared-storage",
    "gloo-allreduce",
    "matmul-burnin",
    "checkpoint-restart",
}


def write(path: Path, data: dict) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def load_report(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    jsonschema.validate(report, SCHEMA)
    return report


def junit_statuses(out: Path) -> dict:
    statuses = {}
    for case in ET.parse(out / "junit.xml").getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        statuses[case.get("name")] = kinds[0] if kinds else "passed"
    return statuses


@pytest.mark.slow
def test_quick_profile_on_a_cpu_node_passes(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    cfg = tiny_cpu_config(shared)
    cfg["sizes"]["checkpoint_world_size"] = 2  # gloo process group; test_checkpoint.py covers 1 rank
    config = write(tmp_path / "node.json", cfg)
    out = tmp_path / "out"
    # The whole quick suite with torch: seconds alone, but the slow tier runs it beside another
    # worker and the container tiers (240 s was exceeded here at load 20): a hang still fails.
    proc = run_cli("run", "--profile", "quick", "--config", config, "--out", str(out), timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = load_report(out)
    assert report["verdict"] == "pass" and report["profile"] == "quick" and report["node"] == "node-001"
    checks = {c["id"]: c for c in report["checks"]}
    for cid in GPU_ONLY:
        assert checks[cid]["status"] == "skip", cid
        assert checks[cid]["summary"].startswith("not applicable: NODE.json says this node has no GPU")
    for cid in CPU_RAN:
        assert checks[cid]["status"] in ("pass", "warn"), (cid, checks[cid]["summary"])
    ckpt = checks["checkpoint-restart"]
    assert ckpt["status"] == "pass"
    assert ckpt["metrics"]["killed_rc"]["value"] == -9
    assert ckpt["metrics"]["world_size"]["value"] == 2
    shards = [line for line in ckpt["evidence"]["lines"] if line.startswith("shard ")]
    assert [s.split(":")[0] for s in shards] == [
        "shard .metadata",
        "shard __0_0.distcp",
        "shard __1_0.distcp",
    ]
    assert ckpt["metrics"]["write_ratio"]["unit"] == "ratio" and ckpt["metrics"]["write_ratio"]["value"] > 0
    assert checks["matmul-burnin"]["metrics"]["rate_device_1"]["unit"] == "GFLOP/s"
    assert checks["gloo-allreduce"]["threshold"]["gloo.all_reduce.1node.busbw_gbps"]["value"] == 0.01
    # One live line per check, and JUnit carries the same verdicts.
    for cid in checks:
        assert any(line.startswith(cid + " ") for line in proc.stdout.splitlines()), cid
    junit = junit_statuses(out)
    assert {k for k, v in junit.items() if v == "skipped"} == {
        k for k, c in checks.items() if c["status"] == "skip"
    }
    assert not [k for k, v in junit.items() if v in ("failure", "error")]


@pytest.mark.slow
def test_quick_profile_with_a_gpu_config_fails_with_nvidia_smis_reason(tmp_path: Path) -> None:
    config = write(
        tmp_path / "node.json", gpu_config(shared_storage={"path": str(tmp_path), "require_mount": False})
    )
    out = tmp_path / "out"
    proc = run_cli("run", "--profile", "quick", "--config", config, "--out", str(out), timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = load_report(out)
    assert report["verdict"] == "fail"
    checks = {c["id"]: c for c in report["checks"]}
    for cid in (
        "gpu-inventory",
        "gpu-health",
        "pcie-link",
        "gpu-throttle",
        "nccl-single-node",
        "matmul-burnin",
    ):
        assert checks[cid]["status"] == "fail", cid
        assert checks[cid]["summary"].startswith("nvidia-smi not found"), checks[cid]["summary"]
    assert checks["gloo-allreduce"]["status"] == "skip"
    assert junit_statuses(out)["gpu-inventory"] == "failure"
    assert "verdict: FAIL" in proc.stdout


@pytest.mark.slow
def test_config_errors_exit_2_with_the_reason(tmp_path: Path) -> None:
    bad = tiny_cpu_config(tmp_path)
    bad["thresholds"]["matmul.cpu_gflops_min"] = "fast"
    proc = run_cli(
        "run", "--profile", "quick", "--config", write(tmp_path / "a.json", bad), "--out", str(tmp_path)
    )
    assert proc.returncode == 2
    assert "thresholds.matmul.cpu_gflops_min: got 'fast'; must be a number >= 0" in proc.stderr
    typo = tiny_cpu_config(tmp_path)
    typo["shared_storage"]["paht"] = "/x"
    proc = run_cli(
        "run", "--profile", "quick", "--config", write(tmp_path / "b.json", typo), "--out", str(tmp_path)
    )
    assert (
        proc.returncode == 2
        and "shared_storage.paht: unknown key; did you mean shared_storage.'path'?" in proc.stderr
    )
    proc = run_cli(
        "run", "--profile", "quick", "--config", str(tmp_path / "missing.json"), "--out", str(tmp_path)
    )
    assert proc.returncode == 2 and "cannot read" in proc.stderr
    proc = run_cli("run", "--profile", "fast", "--config", "x", "--out", "y")
    assert proc.returncode == 2 and "invalid choice: 'fast'" in proc.stderr


def test_list_shows_every_check_with_profiles_and_needs() -> None:
    proc = run_cli("list", "--json")
    assert proc.returncode == 0
    listed = {c["id"]: c for c in json.loads(proc.stdout)}
    assert listed["nccl-multi-node"]["needs"] == ["gpu", "nccl-tests", "peers"]
    assert listed["dcgm-diag"]["profiles"] == ["standard", "full"]
    text = run_cli("list").stdout
    assert all(cid in text for cid in listed)


def test_parse_prints_the_parsers_json_and_rejects_unknown_tools() -> None:
    proc = run_cli("parse", "nccl-tests", str(DATA / "nccl-tests" / "wrong_values_failed.txt"))
    assert proc.returncode == 0
    parsed = json.loads(proc.stdout)
    assert parsed["ok"] is False and parsed["out_of_bounds"] == 108
    proc = run_cli("parse", "nccl-test", "x")
    assert proc.returncode == 2 and "did you mean 'nccl-tests'?" in proc.stderr


def test_no_command_is_a_usage_error_and_list_filters_by_profile() -> None:
    proc = run_cli()
    assert proc.returncode == 2 and "usage: python3 -m validators" in proc.stderr
    quick = {c["id"] for c in json.loads(run_cli("list", "--json", "--profile", "quick").stdout)}
    assert "checkpoint-restart" in quick and "dcgm-diag" not in quick and "gpu-burn" not in quick
