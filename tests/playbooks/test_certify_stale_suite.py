"""certify.yml stops a suite a cut-short run left running on the node, and nothing else.

Found when `invoke certify` was killed mid-run: the next `up` certified the nodes beside the
killed run's suite, still running in them, and every node failed as slow (matmul 63-66 % under
its baseline). On a real container node, through the pipeline's connection: processes carrying
CLUSTERFORGE_CERTIFY_RUN (one in a session of its own, as the workloads run) are killed, a
process without it is left alone, and the task reports what it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from clusterforge.providers.local.config import write_podman_config
from tests.fixtures.play import run_tasks

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
STOP = "Stop a certification suite a cut-short run left running"


def _certify_task(name: str) -> dict:
    play = yaml.safe_load((ROOT / "playbooks" / "certify.yml").read_text())
    return next(t for t in play[0]["tasks"] if t["name"].startswith(name))


def test_the_run_task_marks_the_suite_with_its_run_id() -> None:
    run = _certify_task("Run the certification profile")
    assert run["environment"] == {"CLUSTERFORGE_CERTIFY_RUN": "{{ certify_run_id }}"}


def test_a_left_running_suite_is_stopped_and_nothing_else(container_nodes: Callable, tmp_path: Path) -> None:
    (node,) = container_nodes(1)
    detach = ">/dev/null 2>&1 </dev/null &"
    tasks = [
        {
            "name": "A suite a killed run left: itself, and a workload in a session of its own",
            "environment": {"CLUSTERFORGE_CERTIFY_RUN": "R-old"},
            "ansible.builtin.shell": f"setsid sleep 300 {detach} sleep 300 {detach}",
            "changed_when": False,
        },
        {
            "name": "Something else on the node",
            "ansible.builtin.shell": f"setsid sleep 301 {detach}",
            "changed_when": False,
        },
        _certify_task(STOP),
        {
            "name": "What is left",
            "ansible.builtin.command": "pgrep -fa '^sleep 30[01]$'",
            "register": "left",
            "changed_when": False,
        },
        {
            "name": "Both marked processes stopped and named, the other left running",
            "ansible.builtin.assert": {
                "that": [
                    "__certify_stale is changed",
                    "__certify_stale.stdout.split(', ') | select('search', '[(]run R-old[)]$') | list | length == 2",
                    "left.stdout_lines | map('regex_replace', '^[0-9]+ ', '') | list == ['sleep 301']",
                ]
            },
        },
        _certify_task(STOP) | {"name": "A second look finds nothing"},
        {
            "name": "Nothing stopped twice",
            "ansible.builtin.assert": {"that": ["__certify_stale is not changed"]},
        },
    ]
    run_tasks(tmp_path, {node.name: node.connection}, tasks, write_podman_config())
