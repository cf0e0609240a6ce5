"""Roles whose per-host work does not grow with the cluster (issue 24).

Static (fast): no task iterates or renders the whole cluster (``slurm_nodes``, ``hostvars``,
``groups``, the play's hosts, or a role variable or template built from them) unless it is done
once per play (``run_once``); plays that run such a task stay linear (the free strategy runs a
run_once task on every host). Functional (slow, control-machine hosts, no container): the slurm
role's checks and configuration give the same number of task results per host for 3 and 60
nodes, render the cluster-wide files once per play, and a second run changes nothing.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = REPO / "roles"
PLAYBOOKS = REPO / "playbooks"

# What names the whole cluster: iterating or rendering these is N work.
CLUSTER_WIDE = re.compile(
    r"\bslurm_nodes\b|\bhostvars\b|\bgroups\[|\bansible_play_hosts(_all)?\b|\bansible_play_batch\b"
)


def _tasks(path: Path) -> list[dict[str, Any]]:
    """Every task of a task file, blocks flattened (a block's run_once covers its tasks)."""
    out: list[dict[str, Any]] = []

    def walk(items: list[dict[str, Any]], inherited: bool) -> None:
        for task in items or []:
            once = inherited or bool(task.get("run_once"))
            nested: list[list[dict[str, Any]]] = [
                task[k] for k in ("block", "rescue", "always") if task.get(k)
            ]
            if nested:
                for part in nested:
                    walk(part, once)
                continue
            out.append({**task, "run_once": once})

    walk(yaml.safe_load(path.read_text()) or [], False)
    return out


def _cluster_wide_names(role: Path) -> set[str]:
    """Role variables (vars/, defaults/) and templates whose value or text names the whole cluster,
    closed over variables that use them."""
    defined: dict[str, str] = {}
    for folder in ("vars", "defaults"):
        for path in sorted((role / folder).glob("*.yml")):
            for key, value in (yaml.safe_load(path.read_text()) or {}).items():
                defined[key] = json.dumps(value)
    wide = {k for k, v in defined.items() if CLUSTER_WIDE.search(v)}
    while True:
        more = {
            k for k, v in defined.items() if k not in wide and any(re.search(rf"\b{w}\b", v) for w in wide)
        }
        if not more:
            break
        wide |= more
    # slurm_nodes itself is an input: naming it is fine, iterating it is what CLUSTER_WIDE catches.
    wide.discard("slurm_nodes")
    templates = {p.name for p in (role / "templates").glob("*.j2") if CLUSTER_WIDE.search(p.read_text())}
    return wide | templates


def _offending_tasks() -> list[str]:
    problems = []
    for role in sorted(p for p in ROLES.iterdir() if (p / "tasks").is_dir()):
        wide = _cluster_wide_names(role)
        pattern = re.compile(
            CLUSTER_WIDE.pattern
            + ("|" + "|".join(rf"\b{re.escape(w)}\b" for w in sorted(wide)) if wide else "")
        )
        for path in sorted((role / "tasks").glob("*.yml")):
            for task in _tasks(path):
                if task["run_once"]:
                    continue
                # A failure message is templated only when the check fails: not per-host work.
                body = {k: v for k, v in task.items() if k not in ("name", "run_once")}
                for module in body.values():
                    if isinstance(module, dict):
                        module.pop("fail_msg", None)
                text = json.dumps(body)
                hit = pattern.search(text)
                if hit:
                    problems.append(
                        f"{path.relative_to(REPO)}: {task.get('name')!r} uses {hit.group(0)} on every host"
                    )
    return problems


def test_no_task_does_cluster_wide_work_on_every_host() -> None:
    assert _offending_tasks() == []


def test_the_scanner_catches_a_per_host_loop_over_the_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above fails on what it is meant to catch (the loop preflight.yml had)."""
    role = tmp_path / "roles" / "demo"
    (role / "tasks").mkdir(parents=True)
    (role / "templates").mkdir()
    (role / "vars").mkdir()
    (role / "templates" / "all.conf.j2").write_text("{% for n in slurm_nodes %}{{ n.name }}\n{% endfor %}")
    (role / "vars" / "main.yml").write_text(yaml.safe_dump({"_demo_names": "{{ groups['all'] | sort }}"}))
    (role / "tasks" / "main.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Loop",
                    "ansible.builtin.assert": {"that": "item.name"},
                    "loop": "{{ slurm_nodes }}",
                },
                {"name": "Template", "ansible.builtin.template": {"src": "all.conf.j2", "dest": "/x"}},
                {"name": "Var", "ansible.builtin.debug": {"msg": "{{ _demo_names }}"}},
                {"name": "Once", "ansible.builtin.debug": {"msg": "{{ _demo_names }}"}, "run_once": True},
            ]
        )
    )
    monkeypatch.setattr(sys.modules[__name__], "ROLES", tmp_path / "roles")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    found = _offending_tasks()
    assert [line.split("'")[1] for line in found] == ["Loop", "Template", "Var"]


def _roles_with_run_once() -> set[str]:
    out = set()
    for role in ROLES.iterdir():
        for path in (role / "tasks").glob("*.yml") if (role / "tasks").is_dir() else []:
            if any(t["run_once"] for t in _tasks(path)):
                out.add(role.name)
    return out


def test_plays_with_run_once_roles_are_linear_and_the_rest_may_be_free() -> None:
    once = _roles_with_run_once()
    assert {"slurm", "cluster_hosts", "validators_runtime"} <= once
    free_plays = []
    for path in sorted(PLAYBOOKS.glob("*.yml")):
        for play in yaml.safe_load(path.read_text()) or []:
            roles = [r if isinstance(r, str) else r.get("role") for r in play.get("roles") or []]
            if play.get("strategy") == "free":
                free_plays.append(play["name"])
                assert not set(roles) & once, (
                    f"{path.name}: play {play['name']!r} is free but runs {set(roles) & once}"
                )
    # The node software's per-host roles run at each host's own pace.
    assert "GPU node software" in free_plays


# --- functional: the slurm role on control-machine hosts -----------------------------------

SLURM_PLAY: list[dict[str, Any]] = [
    {
        "name": "The slurm role's checks and cluster-wide configuration",
        "hosts": "all",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Checks",
                "ansible.builtin.include_role": {"name": "slurm", "tasks_from": "preflight.yml"},
            },
            {
                "name": "Configuration",
                "ansible.builtin.include_role": {"name": "slurm", "tasks_from": "config.yml"},
            },
        ],
    }
]


def slurm_vars(nodes: int, out: Path, held_every: int = 2) -> dict[str, Any]:
    """The slurm role's variables for ``nodes`` GPU nodes (every ``held_every``-th held); also
    benchmarks/role_scale.py's input."""
    names = [f"gpu-{i:04d}" for i in range(1, nodes + 1)]
    return {
        "slurm_cluster_name": "scale",
        "slurm_controller_name": "head-001",
        "slurm_controller_address": "10.0.32.4",
        "slurm_munge_key_file": str(out / "munge.key"),
        "slurm_nodes": [
            {
                "name": n,
                "address": f"10.0.{i // 250}.{i % 250 + 1}",
                "cpus": 192,
                "real_memory_mb": 1900000,
                "gpu_type": "h100",
                "gpu_count": 8,
                "gpu_files": "/dev/nvidia[0-7]",
                "hold": i % held_every == 0,
            }
            for i, n in enumerate(names)
        ],
        "slurm_partitions": [{"name": "batch", "nodes": names, "default": True}],
        "slurm_topology_switches": [{"name": "leaf", "nodes": names}],
        # The hosts below are control-machine hosts named like nodes of the list; a login part
        # notifies no daemon restart.
        "slurm_node_role": "login",
        "slurm_gres_autodetect": "off",
    }


def _env(home: Path) -> dict[str, str]:
    return {
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_ROLES_PATH": str(ROLES),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    }


def _run(work: Path, hosts: int, nodes: int) -> tuple[dict[str, int], list[dict[str, Any]], Path]:
    import ansible_runner

    out = work / "etc"
    work.mkdir(parents=True, exist_ok=True)
    inventory = work / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(
        yaml.safe_dump(
            {
                "all": {
                    "hosts": {f"gpu-{i:04d}": local for i in range(1, hosts + 1)},
                    "vars": slurm_vars(nodes, work),
                }
            }
        )
    )
    playbook = work / "play.yml"
    playbook.write_text(yaml.safe_dump(SLURM_PLAY, sort_keys=False))
    home = work / "ansible-home"
    result = ansible_runner.run(
        private_data_dir=str(work),
        playbook=str(playbook),
        inventory=str(inventory),
        # Role variables (vars/main.yml) yield to extra vars: each host writes under its own folder.
        extravars={"_slurm_config_dir": str(out) + "/{{ inventory_hostname }}"},
        envvars=_env(home),
        quiet=True,
    )
    events = [
        e
        for e in result.events
        if e.get("event") in ("runner_on_ok", "runner_on_skipped", "runner_on_failed")
    ]
    assert result.rc == 0, [
        e["event_data"].get("res", {}).get("msg") for e in events if e["event"] == "runner_on_failed"
    ]
    # Every task result and every loop item result a host produced: the work done for it.
    per_host: dict[str, int] = {}
    for e in result.events:
        if (
            e.get("event", "").startswith(("runner_on_", "runner_item_on_"))
            and e["event"] != "runner_on_start"
        ):
            per_host[e["event_data"]["host"]] = per_host.get(e["event_data"]["host"], 0) + 1
    return per_host, events, out


@pytest.mark.slow
def test_slurm_work_per_host_does_not_grow_with_the_node_list(tmp_path: Path) -> None:
    small, _, _ = _run(tmp_path / "small", hosts=3, nodes=3)
    large, events, out = _run(tmp_path / "large", hosts=3, nodes=60)
    assert set(small.values()) == set(large.values()) and len(set(large.values())) <= 2, (small, large)
    rendered = [
        e for e in events if e["event_data"].get("task") == "Render the cluster-wide Slurm configuration once"
    ]
    assert len(rendered) == 1  # once for the play, not once per host
    conf = (out / "gpu-0002" / "slurm.conf").read_text()
    assert conf.count("NodeName=gpu-") == 60 and conf.endswith("\n")
    assert (
        (out / "gpu-0001" / "slurm.conf").read_text() == conf == (out / "gpu-0003" / "slurm.conf").read_text()
    )
    gres = (out / "gpu-0001" / "gres.conf").read_text()
    assert gres.count("Type=h100 File=/dev/nvidia[0-7]") == 60 and "AutoDetect" not in gres
    assert (out / "gpu-0001" / "topology.conf").read_text().startswith("# ")
    # Copied as text, the files are idempotent: a second run changes nothing.
    _, again, _ = _run(tmp_path / "large", hosts=3, nodes=60)
    assert [e["event_data"]["task"] for e in again if e["event_data"].get("res", {}).get("changed")] == []


@pytest.mark.slow
def test_slurm_checks_name_every_bad_node_at_once(tmp_path: Path) -> None:
    import ansible_runner

    variables = slurm_vars(4, tmp_path)
    variables["slurm_nodes"][1]["name"] = "bad name"
    del variables["slurm_nodes"][2]["gpu_files"]
    inventory = tmp_path / "hosts.yml"
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(
        yaml.safe_dump({"all": {"hosts": {"gpu-0001": local, "gpu-0002": local}, "vars": variables}})
    )
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump([{**SLURM_PLAY[0], "tasks": SLURM_PLAY[0]["tasks"][:1]}], sort_keys=False)
    )
    home = tmp_path / "ansible-home"
    result = ansible_runner.run(
        private_data_dir=str(tmp_path),
        playbook=str(playbook),
        inventory=str(inventory),
        envvars=_env(home),
        quiet=True,
    )
    failed = [e["event_data"] for e in result.events if e.get("event") == "runner_on_failed"]
    assert result.rc != 0 and len(failed) == 1, failed  # one check, once, for the whole list
    msg = failed[0]["res"]["msg"]
    assert "bad name" in msg and "gpu-0003" in msg and "gpu-0004" not in msg
    # A failing once-per-play check stops every host of the play.
    assert set(result.stats.get("failures", {})) | set(result.stats.get("dark", {})) >= {"gpu-0001"}
