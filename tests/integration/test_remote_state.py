"""The shared local stack with its state in a shared backend, driven from two checkouts.

Clone 1 is this checkout with the stack's own state folder: it moves the stack's history into a
shared state folder (`invoke state.push`: the migration) and runs `up` from there. Clone 2 is a
fresh checkout (the tracked files copied, the set-up's .venv, engine configuration, collections
and node torch linked as `scripts/setup.sh` would have made them; no journal, no baselines, no
inventory of its own). While clone 1's `up` runs, clone 2's `certify` exits 2 naming it; then
clone 2's `plan`, `certify` and `upgrade` see what clone 1 applied and the stored baselines.
The stack ends certified and serving (the certification passes), for the tests after this one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.integration.stack import COMPUTE, INVOKE, ROOT, Stack, assert_serving, cf, wait_for

# Opt-in (`long`) to keep CI under an hour: passed in the CI rehearsal of 2026-12-02 (119 s); run it
# with `invoke test --marks long --path tests/integration/test_remote_state.py`.
pytestmark = [pytest.mark.integration, pytest.mark.long]

TREE = ("clusterforge", "roles", "playbooks", "plugins", "stacks", "validators", "schemas", "inventories")
FILES = ("tasks.py", "ansible.cfg", "pyproject.toml", ".yamllint")
SETUP = ("collections", "engine", "node-torch")  # what scripts/setup.sh puts under .clusterforge/


def fresh_clone(where: Path) -> Path:
    tracked = subprocess.run(
        ["git", "ls-files", *TREE, *FILES], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for rel in tracked:
        if (ROOT / rel).is_file():
            (where / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, where / rel)
    (where / ".venv").symlink_to(ROOT / ".venv")
    (where / ".clusterforge").mkdir()
    for part in SETUP:
        if (ROOT / ".clusterforge" / part).exists():
            (where / ".clusterforge" / part).symlink_to(ROOT / ".clusterforge" / part)
    return where


def cf_in(
    root: Path, *args: str, env: dict[str, str], timeout: float = 1800
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(root / ".venv" / "bin" / "invoke"), *args],
        cwd=root, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    sys.stdout.write(
        f"$ (clone 2) invoke {' '.join(args)} -> {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}\n"
    )
    return proc


def test_a_second_clone_sees_the_applied_state_and_waits_its_turn(local_stack: Stack, tmp_path: Path) -> None:
    stack = local_stack
    start = time.monotonic()
    shared = tmp_path / "shared-state"  # a shared filesystem's path, as for a static cluster
    shared.mkdir()
    spec = yaml.safe_load(stack.spec.read_text())
    spec["state"] = {"backend": str(shared), "lease_s": 120}
    spec_file = tmp_path / f"{stack.name}.yaml"
    spec_file.write_text(yaml.safe_dump(spec, sort_keys=False))
    one = dict(stack.env)
    moved = cf("state.push", "--spec", str(spec_file), env=one)
    assert moved.returncode == 0 and "serial 1" in moved.stdout, moved.stderr

    two_root = fresh_clone(tmp_path / "clone2")
    two = dict(stack.env, CLUSTERFORGE_STATE_DIR=str(tmp_path / "clone2" / ".clusterforge"))
    lock = shared / stack.name / "lock.json"
    up = subprocess.Popen(
        [INVOKE, "up", "--spec", str(spec_file)], cwd=ROOT, env=one, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_for(
            "clone 1's `up` to take the lock", lambda: lock.exists() or up.poll() is not None, timeout=300
        )
        # A converged `up` takes seconds: it is paused (it keeps its lock, its lease runs 120 s) so that
        # clone 2's command surely starts while it runs, whatever the machine's load.
        os.kill(up.pid, signal.SIGSTOP)
        assert up.poll() is None, "clone 1's `up` ended before clone 2 could race it"
        busy = cf_in(
            two_root, "certify", "--spec", str(spec_file), "--nodes", "node-001", env=two, timeout=300
        )
        os.kill(up.pid, signal.SIGCONT)
        assert busy.returncode == 2, busy.stderr
        said = " ".join(busy.stderr.split())
        assert f"stack '{stack.name}' is busy: `invoke up --spec {spec_file}`" in said and str(lock) in said
        out, err = up.communicate(timeout=1800)
    finally:
        if up.poll() is None:
            os.kill(up.pid, signal.SIGCONT)
            up.terminate()
            up.wait(120)
    sys.stdout.write(f"$ (clone 1) invoke up -> {up.returncode}\n{out[-4000:]}\n{err[-2000:]}\n")
    assert up.returncode == 0 and "Ansible changes: 0" in " ".join(out.split())
    assert not lock.exists()

    plan = cf_in(two_root, "plan", "--spec", str(spec_file), env=two)
    assert plan.returncode == 0, plan.stderr  # what clone 1 applied is what the spec says
    assert "no changes (working tree against last applied state (journal))" in " ".join(plan.stdout.split())

    cert = cf_in(two_root, "certify", "--spec", str(spec_file), "--nodes", "node-001", env=two)
    assert cert.returncode == 0, cert.stderr
    report = json.loads(
        (
            tmp_path / "clone2" / ".clusterforge" / stack.name / "reports" / "node-001" / "report.json"
        ).read_text()
    )
    kinds = {m.get("reference_kind") for m in report.get("fleet", {}).get("metrics", [])}
    assert "baseline" in kinds, report.get("fleet")  # one node: judged against clone 1's stored baseline
    assert (two_root / "inventories" / stack.name / "hosts.yml").exists()

    upgrade = cf_in(two_root, "upgrade", "--spec", str(spec_file), "--yes", env=two)
    assert upgrade.returncode == 0 and "nothing to upgrade" in upgrade.stdout, upgrade.stderr

    rows = {
        r["node"]: r for r in json.loads(cf("status", "--json", "--spec", str(spec_file), env=one).stdout)
    }
    assert rows["node-001"]["certification"] == "certified"
    shown = json.loads(cf("state.show", "--json", "--spec", str(spec_file), env=one).stdout)
    assert shown["written_by"]["command"].startswith("invoke certify") and shown["lock"] is None
    assert_serving(stack, COMPUTE)
    sys.stdout.write(f"remote-state integration test: {time.monotonic() - start:.0f} s on the shared stack\n")
