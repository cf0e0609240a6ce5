"""The stored baselines reach the health loop's shared folder (clusterforge/pipeline/health_baselines.py):
only where the spec runs the loop, once a baseline exists and a head ended the run in service; a failed
copy is said with its task and the fix. The real playbook (slow) copies each file, changes nothing the
second time, and keeps a file the workstation no longer has."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from clusterforge.ansible.events import HostProgress, TaskFailure
from clusterforge.ansible.runner import PlaybookResult
from clusterforge.pipeline.health_baselines import publish_baselines
from clusterforge.pipeline.scheduler import NodeProgress, Status
from clusterforge.providers.base import Node
from clusterforge.spec.loader import load_spec

REPO = Path(__file__).resolve().parents[2]
LOOP = "health:\n  active: {profile: quick, every: 12h, max_nodes: 1}\n"


def _ctx(tmp_path: Path, health: str = LOOP, stack: str = "hb") -> Any:
    path = tmp_path / "spec.yaml"
    text = (REPO / "stacks" / "local.yaml").read_text().replace("stack: local", f"stack: {stack}", 1)
    path.write_text(text + health)
    spec = load_spec(path)[0]
    assert spec.stack == stack
    heads = [Node("head-001", "10.0.0.2", "head", "head", "local", {}, "c-head")]
    state = tmp_path / "state" / stack
    return SimpleNamespace(
        spec=spec,
        paths=SimpleNamespace(state=state, run=state / "runs" / "r1"),
        heads=lambda: heads,
        playbooks=REPO / "playbooks",
        hosts_file=tmp_path / "inv" / "hosts.yml",
        secrets=lambda: [],
        env=lambda: {},
    )


def _baseline(ctx: Any, instance_type: str = "local") -> Path:
    folder = ctx.paths.state / "baselines"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{instance_type}.json"
    path.write_text(json.dumps({"instance_type": instance_type, "metrics": {}}))
    return path


def _done(*names: str, status: Status = Status.DONE) -> dict[str, NodeProgress]:
    return {n: NodeProgress(n, status=status) for n in names}


class FakePlay:
    def __init__(self, result: PlaybookResult | None = None) -> None:
        self.calls: list[tuple[str, Path, str]] = []
        self.result = result

    def __call__(self, ctx: Any, head: str, src: Path, dest: str) -> PlaybookResult:
        self.calls.append((head, src, dest))
        if self.result is not None:
            return self.result
        hosts = {head: HostProgress(head, ok=3, changed=1)}
        return PlaybookResult("health_baselines.yml", 0, "successful", hosts, {}, src, src / "log",
                              {"processed": {head: 1}})  # fmt: skip


def test_a_spec_without_the_loop_copies_nothing(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, health="")
    _baseline(ctx)
    play = FakePlay()
    assert publish_baselines(ctx, _done("head-001"), play) is None and play.calls == []


def test_nothing_to_copy_before_a_baseline_or_without_a_head_in_service(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    play = FakePlay()
    assert publish_baselines(ctx, _done("head-001"), play) is None  # no baseline recorded yet
    _baseline(ctx)
    assert publish_baselines(ctx, _done("head-001", status=Status.FAILED), play) is None
    assert publish_baselines(ctx, _done("node-001"), play) is None  # the head was not in this run
    assert play.calls == []


def test_the_baselines_folder_goes_to_the_loops_folder_on_the_head(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    _baseline(ctx, "local")
    _baseline(ctx, "local-big")
    play = FakePlay()
    published = publish_baselines(ctx, _done("head-001", "node-001"), play)
    dest = f"{ctx.spec.storage.shared_path}/clusterforge-health/hb/baselines"
    assert play.calls == [("head-001", ctx.paths.state / "baselines", dest)]
    assert published is not None and published.ok
    assert published.line == f"baselines: 2 file(s) in head-001:{dest} (1 Ansible change(s))"


def test_a_failed_copy_says_the_task_and_the_fix(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    _baseline(ctx)
    failure = TaskFailure("head-001", "Create the loop's baselines folder", "", "Read-only file system")
    failed = PlaybookResult(
        "health_baselines.yml", 2, "failed", {}, {"head-001": failure}, tmp_path, tmp_path
    )
    published = publish_baselines(ctx, _done("head-001"), FakePlay(failed))
    assert published is not None and not published.ok
    assert (
        "TASK [Create the loop's baselines folder] failed on head-001: Read-only file system"
        in published.line
    )
    assert "until the next `invoke up` or `invoke certify` copies them" in published.line


@pytest.mark.slow
def test_the_playbook_copies_each_baseline_once_and_keeps_an_older_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clusterforge.ansible.runner import ansible_env
    from clusterforge.pipeline import health_baselines

    ctx = _ctx(tmp_path)
    dest = tmp_path / "shared" / "clusterforge-health" / "hb" / "baselines"
    monkeypatch.setattr(health_baselines, "destination", lambda _ctx: str(dest))  # not the spec's /shared
    first = _baseline(ctx, "local")
    conn = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "ansible_become": False,
    }
    inventory = {"all": {"children": {"slurm_controller": {"hosts": {"head-001": conn}}}}}
    ctx.hosts_file.parent.mkdir(parents=True)
    ctx.hosts_file.write_text(yaml.safe_dump(inventory))
    ctx.env = lambda: ansible_env(ctx.paths.state)
    dest.mkdir(parents=True)
    (dest / "retired-type.json").write_text("{}")  # a type the workstation no longer has

    published = publish_baselines(ctx, _done("head-001"))
    assert published is not None and published.ok, published
    assert (dest / "local.json").read_text() == first.read_text()
    assert oct((dest / "local.json").stat().st_mode & 0o777) == "0o644"
    assert published.line.endswith("(1 Ansible change(s))")

    again = publish_baselines(ctx, _done("head-001"))
    assert again is not None and again.ok and again.line.endswith("(0 Ansible change(s))")
    assert (dest / "retired-type.json").exists()
    assert len(os.listdir(ctx.paths.run)) == 2  # each run's Ansible log, beside the stack's other runs
