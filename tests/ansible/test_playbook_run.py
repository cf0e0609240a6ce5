"""PlaybookRun against two local-connection hosts: progress callbacks, log kept, secret scrubbed."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest
import yaml

from clusterforge.ansible.runner import PlaybookRun

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
