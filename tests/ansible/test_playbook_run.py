"""PlaybookRun against two local-connection hosts: progress callbacks, log kept, secret scrubbed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from clusterforge.ansible.runner import PlaybookRun, reap

# slow: real ansible-playbook runs (and signals to them)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

PLAY = [
    {
        "name": "Tiny play",
        "hosts": "all",
        "gather_facts": False,
        "tasks": [
            {"name": "Leak a secret by mistake", "ansible.builtin.debug": {"msg": "key is {{ leaked }}"}},
            {
                "name": "Fail on b",
                "ansible.builtin.fail": {"msg": "pinned package drifted"},
                "when": "inventory_hostname == 'b'",
            },
        ],
    }
]


@pytest.fixture
def ansible_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TMP"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    return tmp_path


def test_run_reports_per_host_and_scrubs_secret(ansible_tmp: Path) -> None:
    play = ansible_tmp / "play.yml"
    play.write_text(yaml.safe_dump(PLAY))
    hosts = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = ansible_tmp / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"a": hosts, "b": hosts}}}))
    secret = b"super-secret-munge-key-0123456789"
    updates: list[str] = []
    run = PlaybookRun(
        play,
        inventory,
        ansible_tmp / "runs",
        extravars={"leaked": secret.decode()},
        secrets=[secret],
        on_update=lambda h: updates.append(h.host),
        env={"ANSIBLE_HOME": str(ansible_tmp / "ah")},
    )
    result = run.run()
    assert result.status == "failed" and result.rc != 0
    assert result.host_ok("a") and not result.host_ok("b")
    assert (
        result.failures["b"].task == "Fail on b" and result.failures["b"].message == "pinned package drifted"
    )
    assert {"a", "b"} <= set(updates)
    log = result.log.read_text()
    assert "Fail on b" in log  # the full log is kept ...
    for path in result.run_dir.rglob("*"):
        if path.is_file() and path.name != "extravars":
            assert secret.decode() not in path.read_text(errors="replace"), path  # ... without the secret


def test_cancel_leaves_no_process_behind(ansible_tmp: Path) -> None:
    from clusterforge.ansible.runner import _marked

    play = ansible_tmp / "slow.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Slow play",
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [
                        {"name": "Take long", "ansible.builtin.command": "sleep 120", "changed_when": False}
                    ],
                }
            ]
        )
    )
    hosts = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = ansible_tmp / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"a": hosts, "b": hosts}}}))
    started = threading.Event()
    run = PlaybookRun(play, inventory, ansible_tmp / "runs", on_update=lambda h: started.set())
    threading.Thread(target=lambda: started.wait(60) and run.cancel(), daemon=True).start()
    result = run.run()
    assert result.status == "canceled"
    assert not result.host_ok("a") and not result.host_ok("b")
    assert _marked(str(run.run_dir)) == []  # workers and their `sleep` are gone too


# A command that runs a playbook the way `invoke certify`/`up` (scheduler worker thread) and
# `invoke upgrade`'s converge (main thread) do, inside the stack lock, until it is signalled.
PARENT = """
import sys
from pathlib import Path

from clusterforge.ansible.runner import PlaybookRun
from clusterforge.pipeline.scheduler import BaseStage, Scheduler, StageResult
from clusterforge.tasks._cli import locked

play, inventory, runs, mode = sys.argv[1:5]
run = PlaybookRun(Path(play), Path(inventory), Path(runs))


class Converge(BaseStage):
    name = "converge"

    def run(self, nodes):
        result = run.run()
        return {n: StageResult(result.host_ok(n)) for n in nodes}

    def cancel(self):
        run.cancel()


try:
    with locked("sigtest", "certify"):
        if mode == "main-thread":
            run.run()
        else:
            Scheduler([Converge()], ["a"]).run()
except KeyboardInterrupt:
    sys.exit(130)
sys.exit(0)
"""


def _wait_for(what: Callable[[], str], timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.2)
    return what()


@pytest.mark.parametrize(
    ("sig", "mode"),
    [
        (signal.SIGTERM, "main-thread"),
        (signal.SIGINT, "main-thread"),
        (signal.SIGTERM, "scheduler"),
    ],
)
def test_a_signalled_command_leaves_no_playbook_running(
    ansible_tmp: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals, mode: str
) -> None:
    from clusterforge.ansible.runner import _marked

    play = ansible_tmp / "slow.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Slow play",
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [
                        {"name": "Take long", "ansible.builtin.command": "sleep 300", "changed_when": False}
                    ],
                }
            ]
        )
    )
    hosts = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = ansible_tmp / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"a": hosts}}}))
    script = ansible_tmp / "parent.py"
    script.write_text(PARENT)
    state = ansible_tmp / "state"
    runs = ansible_tmp / "runs"
    env = {**os.environ, "CLUSTERFORGE_STATE_DIR": str(state), "PYTHONPATH": str(ROOT)}
    parent = subprocess.Popen(
        [sys.executable, str(script), str(play), str(inventory), str(runs), mode], cwd=ROOT, env=env
    )
    marker = ""
    try:
        # Wait until the task's `sleep` runs under ansible-playbook (its own session, like on a node).
        def sleeping() -> str:
            for run_dir in runs.glob("*-slow") if runs.is_dir() else []:
                for pid in _marked(str(run_dir)):
                    try:
                        if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0"):
                            return str(run_dir)
                    except OSError:
                        continue
            return ""

        marker = _wait_for(sleeping, 90)
        assert marker, "the playbook's task never started"
        playbook = [
            p for p in _marked(marker) if b"ansible-playbook" in Path(f"/proc/{p}/cmdline").read_bytes()
        ]
        assert playbook and os.getsid(playbook[0]) != os.getsid(parent.pid)  # out of the signal's reach
        lock = state / "sigtest" / "lock"
        assert json.loads(lock.read_text())["pid"] == parent.pid
        parent.send_signal(sig)
        assert parent.wait(timeout=60) == 130
        assert _marked(marker) == [], "ansible-playbook (or its task) outlived the command"
        assert lock.read_text() == ""  # released cleanly: no dead holder for the next command to take over
    finally:
        if parent.poll() is None:
            parent.kill()
        if marker:
            reap(marker, grace_s=1.0)
