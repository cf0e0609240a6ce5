"""The commands against S3 on loopback, as a CI runner runs them: the endpoint and credentials come
from the environment (boto3's own variables), the errors are one line naming the backend."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clusterforge.journal import Journal
from clusterforge.spec.loader import REPO_ROOT

pytestmark = pytest.mark.slow  # a moto server and invoke processes

INVOKE = Path(sys.executable).parent / "invoke"


def _spec(tmp_path: Path, backend: str) -> Path:
    spec = yaml.safe_load((REPO_ROOT / "stacks" / "local.yaml").read_text())
    spec["stack"] = "cis3"
    spec["state"] = {"backend": backend, "region": "us-east-1"}
    path = tmp_path / "cis3.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "CLUSTERFORGE_DEBUG"}
    full.update(env)
    return subprocess.run(
        [str(INVOKE), *args], cwd=REPO_ROOT, env=full, capture_output=True, text=True, timeout=120
    )


def test_push_then_show_from_another_runner(s3_url: str, tmp_path: Path) -> None:
    spec = _spec(tmp_path, s3_url)
    workstation = tmp_path / "ws"
    Journal("cis3", workstation).mark_done("node-001", "certified", verdict="pass")
    pushed = _run("state.push", "--spec", str(spec), env={"CLUSTERFORGE_STATE_DIR": str(workstation)})
    assert pushed.returncode == 0, pushed.stderr
    assert f"{s3_url}/cis3/state.json: the journal" in pushed.stdout and "serial 1" in pushed.stdout
    shown = _run(
        "state.show", "--spec", str(spec), "--json", env={"CLUSTERFORGE_STATE_DIR": str(tmp_path / "ci")}
    )
    data = json.loads(shown.stdout)
    assert data["serial"] == 1 and data["this_copy"] == "no copy synced here" and data["lock"] is None


def test_an_unreachable_bucket_stops_a_command_before_anything_changes(
    fake_aws: None, tmp_path: Path
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = _spec(tmp_path, "s3://cf-state/clusters")
    env = {
        "CLUSTERFORGE_STATE_DIR": str(tmp_path / "ci"),
        "AWS_ENDPOINT_URL_S3": f"http://127.0.0.1:{port}",
        "AWS_MAX_ATTEMPTS": "1",
    }
    proc = _run("certify", "--spec", str(spec), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = " ".join(proc.stderr.split())
    assert "state backend s3://cf-state/clusters: cannot be reached" in said
    assert "Nothing was changed on the cluster" in said and "Traceback" not in said
    assert not (tmp_path / "ci" / "cis3").exists()
