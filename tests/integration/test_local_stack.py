"""The whole line on real containers: `invoke up` a local stack with 2 compute nodes, both admitted;
a second `up` changes nothing; a node whose pinned package drifted is drained by `invoke certify`
with the failing check as the reason while the other stays idle; `down` leaves nothing behind.

The stack gets its own name, network and state folder (never clashes with a user's `local`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INVOKE = str(Path(sys.executable).parent / "invoke")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman (scripts/setup.sh installs it)"),
]

# Replace node-002's slurmd by the same build relabelled 22.05.7-1: a pinned package at another
# version (what an unattended upgrade or a hand-installed .deb does), slurmd itself still works.
DRIFT = r"""
set -e
cd /var/tmp
deb=$(ls /var/cache/apt/archives/slurmd_*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then apt-get download slurmd >/dev/null; deb=$(ls slurmd_*.deb | head -n1); fi
rm -rf drift && dpkg-deb -R "$deb" drift
sed -i 's/^Version: .*/Version: 22.05.7-1/' drift/DEBIAN/control
dpkg-deb -b drift slurmd-drift.deb >/dev/null
dpkg -i --force-downgrade --force-hold slurmd-drift.deb >/dev/null
dpkg-query -W -f='${Version}' slurmd
"""


def cf(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [INVOKE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    sys.stdout.write(
        f"$ invoke {' '.join(args)} -> {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}\n"
    )
    return proc


def podman(*args: str) -> str:
    """The engine through the project's wrapper (its own configuration, never the machine's)."""
    from clusterforge.providers.local.engine import detect_engine

    return detect_engine("podman").run(*args, timeout=120).stdout


def sinfo(stack: str) -> dict[str, tuple[str, str]]:
    out = podman("exec", f"{stack}-head-001", "sinfo", "-h", "-N", "-o", "%N %T %E")
    rows = {}
    for line in out.splitlines():
        name, state, reason = (line.split(None, 2) + [""])[:3]
        rows[name] = (state, reason)
    return rows


@pytest.mark.timeout(1500)
def test_local_stack_end_to_end(tmp_path: Path) -> None:
    from clusterforge.providers.local.engine import detect_engine
    from tests.fixtures.nodes import _free_cidr  # the provider fixtures' free-subnet finder

    stack = f"it{os.getpid()}"
    spec = yaml.safe_load((ROOT / "stacks" / "local.yaml").read_text())
    spec["stack"] = stack
    spec["provider"]["network_cidr"] = str(_free_cidr(detect_engine("podman")))
    for pool in spec["node_pools"]:
        if pool["role"] == "gpu":
            pool["count"] = 2
    spec_file = tmp_path / f"{stack}.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    env = dict(os.environ, CLUSTERFORGE_STATE_DIR=str(tmp_path / "state"))
    for var in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP"):
        env[var] = str(tmp_path / var.lower())
    try:
        first = cf("up", "--spec", str(spec_file), env=env)
        assert first.returncode == 0, "first up failed"
        rows = {
            r["node"]: r for r in json.loads(cf("status", "--spec", str(spec_file), "--json", env=env).stdout)
        }
        for node in ("node-001", "node-002"):
            assert rows[node]["certification"] == "certified", rows[node]
            assert rows[node]["slurm_state"] == "idle", rows[node]
        assert {n: s for n, (s, _) in sinfo(stack).items()} == {"node-001": "idle", "node-002": "idle"}
        certified_at = {n: rows[n]["certified_at"] for n in ("node-001", "node-002")}

        second = cf("up", "--spec", str(spec_file), env=env)
        assert second.returncode == 0
        assert "Ansible changes: 0;" in second.stdout
        rows = {
            r["node"]: r for r in json.loads(cf("status", "--spec", str(spec_file), "--json", env=env).stdout)
        }
        assert {n: rows[n]["certified_at"] for n in certified_at} == certified_at  # nothing re-certified

        drifted = podman("exec", f"{stack}-node-002", "sh", "-c", DRIFT).strip()
        assert drifted == "22.05.7-1"
        recert = cf("certify", "--spec", str(spec_file), env=env)
        assert recert.returncode == 1  # a node failed
        states = sinfo(stack)
        assert states["node-001"] == ("idle", "none")
        assert states["node-002"][0] == "drained"
        assert states["node-002"][1].startswith("clusterforge: software-versions:"), states["node-002"]
        assert "22.05.7" in states["node-002"][1]
        report = json.loads((tmp_path / "state" / stack / "reports" / "node-002" / "report.json").read_text())
        assert report["verdict"] == "fail"
    finally:
        down = cf("down", "--spec", str(spec_file), "--yes", env=env, timeout=300)
        shutil.rmtree(ROOT / "inventories" / stack, ignore_errors=True)
    assert down.returncode == 0
    label = f"label=clusterforge.stack={stack}"
    assert podman("ps", "-a", "-q", "--filter", label).strip() == ""
    assert podman("network", "ls", "-q", "--filter", label).strip() == ""
    assert podman("volume", "ls", "-q", "--filter", label).strip() == ""
