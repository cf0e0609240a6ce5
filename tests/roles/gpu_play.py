"""Run the GPU roles' test playbook with ansible-runner and summarise what each host did."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from clusterforge.ansible.runner import CONNECTION_PLUGINS

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = Path(__file__).resolve().parent / "playbooks" / "gpu_roles.yml"


@dataclass
class PlayOutcome:
    rc: int
    status: str
    stats: dict[str, dict[str, int]]
    changed_tasks: dict[str, list[str]] = field(default_factory=dict)  # host -> task names
    messages: dict[str, list[str]] = field(default_factory=dict)  # host -> debug messages
    failures: dict[str, list[str]] = field(default_factory=dict)
    log: str = ""

    def changed(self, host: str) -> int:
        return self.stats.get("changed", {}).get(host, 0)

    def explain(self) -> str:
        return f"status={self.status} rc={self.rc} failures={self.failures}\n--- log tail ---\n{self.log[-6000:]}"


def write_inventory(path: Path, groups: dict[str, dict[str, Any]]) -> Path:
    """``groups``: name -> {"hosts": {host: connection vars}, "vars": group_vars}."""
    path.write_text(yaml.safe_dump({"all": {"children": groups}}, sort_keys=False))
    return path


def run_play(
    work: Path,
    inventory: Path,
    env: dict[str, str],
    *,
    check: bool = False,
    limit: str | None = None,
    extravars: dict[str, Any] | None = None,
    playbook: Path = PLAYBOOK,
) -> PlayOutcome:
    import ansible_runner

    work.mkdir(parents=True, exist_ok=True)
    home = work / "ansible-home"
    envvars = {
        **env,
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_REMOTE_TMP": "/var/tmp/.ansible-tmp",
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_CONNECTION_PLUGINS": str(CONNECTION_PLUGINS),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PIPELINING": "True",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }
    result = ansible_runner.run(
        private_data_dir=str(work),
        playbook=str(playbook),
        inventory=str(inventory),
        envvars=envvars,
        cmdline="--check --diff" if check else None,
        limit=limit,
        extravars=extravars or {},
        quiet=True,
    )
    outcome = PlayOutcome(rc=int(result.rc), status=str(result.status), stats=dict(result.stats or {}))
    for event in result.events:
        data = event.get("event_data") or {}
        host = data.get("host")
        res = data.get("res") or {}
        if event.get("event") == "runner_on_ok":
            if res.get("changed"):
                outcome.changed_tasks.setdefault(host, []).append(data.get("task", ""))
            if isinstance(res.get("msg"), str) and data.get("task_action") == "ansible.builtin.debug":
                outcome.messages.setdefault(host, []).append(res["msg"])
        elif event.get("event") in ("runner_on_failed", "runner_on_unreachable") and not data.get(
            "ignore_errors"
        ):
            outcome.failures.setdefault(host, []).append(f"{data.get('task')}: {res.get('msg', res)}")
    stdout = work / "artifacts" / result.config.ident / "stdout"
    outcome.log = stdout.read_text() if stdout.is_file() else ""
    return outcome
