"""Both sides of a plan read whole: a git ref, the working tree, the journal; a bad side is an error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from invoke import Context
from invoke.exceptions import Exit

from clusterforge.journal import Journal
from clusterforge.plan.applied import record_converged
from clusterforge.plan.impact import LiveState
from clusterforge.plan.render import markdown, to_json
from clusterforge.plan.sources import PlanError, base_from_journal, base_from_ref
from clusterforge.spec.loader import load_spec
from clusterforge.tasks import plan as plan_task
from tests.plan.conftest import commit, edit


def _plan(repo: Path, base: str = "main") -> Any:
    return plan_task.build_plan(repo / "stacks" / "local.yaml", base, live=False)


def test_a_no_op_against_the_ref_changes_nothing(repo: Path) -> None:
    result = _plan(repo)
    assert not result.pending and result.changed == []
    assert "no changes" in result.headline()


def test_a_spec_bump_against_the_ref_names_every_compute_node(repo: Path) -> None:
    edit(repo / "stacks" / "local.yaml", "slurm: 22.05.8", "slurm: 22.05.9")
    result = _plan(repo)
    changed = {i.node: i.actions() for i in result.changed}
    assert changed == {
        "head-001": ["configure"],
        **{f"node-00{k}": ["configure", "re-certify"] for k in range(1, 5)},
    }


def test_a_role_file_change_configures_only_where_the_role_runs(repo: Path) -> None:
    defaults = repo / "roles" / "validators_runtime" / "defaults" / "main.yml"
    defaults.write_text(defaults.read_text() + "# a comment\n")
    result = _plan(repo)
    assert {i.node for i in result.changed} == {f"node-00{k}" for k in range(1, 5)}
    assert all(i.configure == ("validators_runtime",) and not i.recertify for i in result.changed)
    assert "validators_runtime (files)" in result.changed[0].reasons[-1]


def test_a_base_whose_spec_does_not_parse_is_an_error_naming_side_file_and_line(repo: Path) -> None:
    spec = repo / "stacks" / "local.yaml"
    good = spec.read_text()
    edit(spec, "  count: 4", "  count: four")
    commit(repo, "broken")
    spec.write_text(good)  # the working tree is fine, the base is not
    with pytest.raises(PlanError) as err:
        _plan(repo)
    message = str(err.value)
    line = good.splitlines().index("    count: 4") + 1
    assert "base main" in message and f"main:stacks/local.yaml:{line}" in message
    assert "node_pools[1].count" in message


def test_a_base_with_broken_yaml_is_an_error_with_its_line(repo: Path) -> None:
    spec = repo / "stacks" / "local.yaml"
    good = spec.read_text()
    spec.write_text(good.replace("stack: local", "stack: [local", 1))
    commit(repo, "broken yaml")
    spec.write_text(good)
    with pytest.raises(PlanError, match=r"main:stacks/local.yaml:\d+: YAML syntax"):
        _plan(repo)


def test_an_unknown_ref_says_so(repo: Path) -> None:
    with pytest.raises(PlanError, match="--base nope: not a commit"):
        base_from_ref(repo, "nope", "stacks/local.yaml")


def test_a_spec_new_in_the_working_tree_creates_every_node(repo: Path) -> None:
    new = repo / "stacks" / "extra.yaml"
    new.write_text((repo / "stacks" / "local.yaml").read_text().replace("stack: local", "stack: extra"))
    result = plan_task.build_plan(new, "main", live=False)
    assert {i.provision for i in result.impacts} == {"create"}
    assert any("not in main" in n for n in result.notes)


def test_a_bad_working_tree_spec_is_an_error_too(repo: Path) -> None:
    edit(
        repo / "stacks" / "local.yaml",
        "instance_type: local\n    count: 4",
        "instance_type: lcal\n    count: 4",
    )
    with pytest.raises(Exit) as err:
        _plan(repo)
    assert err.value.code == 1 and "working tree" in str(err.value.message)


def test_the_journal_record_is_the_default_base(tmp_path: Path, repo: Path) -> None:
    spec, _ = load_spec(repo / "stacks" / "local.yaml")
    journal = Journal("local", tmp_path / "state")
    with pytest.raises(PlanError, match="no applied state recorded"):
        base_from_journal(journal)
    names = ["head-001", "node-001", "node-002", "node-003", "node-004"]
    record_converged(journal, spec, names, root=repo)
    base = base_from_journal(Journal("local", tmp_path / "state"))
    assert sorted(base.nodes) == names
    assert base.nodes["node-001"].pinned["slurm_version"] == "22.05.8"


def _fake_provider() -> Any:
    class Nothing:
        def nodes(self, spec: Any) -> list[Any]:
            return []

        def plan(self, spec: Any) -> list[Any]:
            return []

    return Nothing()


def _run_task(monkeypatch: pytest.MonkeyPatch, repo: Path, tmp_path: Path, **kwargs: Any) -> int:
    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(plan_task, "get_provider", lambda spec: _fake_provider())
    try:
        plan_task.plan(Context(), spec=str(repo / "stacks" / "local.yaml"), **kwargs)
    except Exit as exc:
        return int(exc.code)
    return 0


def test_exit_codes_follow_terraforms_detailed_exitcode(
    monkeypatch: pytest.MonkeyPatch, repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run_task(monkeypatch, repo, tmp_path, base="main") == 0
    assert "no changes" in capsys.readouterr().out
    edit(repo / "stacks" / "local.yaml", "nccl: 2.26.2", "nccl: 2.26.2\n  dcgm: 4.2.3")
    assert _run_task(monkeypatch, repo, tmp_path, base="main") == 2
    assert _run_task(monkeypatch, repo, tmp_path, base="nope") == 1
    assert _run_task(monkeypatch, repo, tmp_path) == 1  # nothing recorded in the journal
    assert _run_task(monkeypatch, repo, tmp_path, format="yaml") == 1


def test_json_and_markdown_shapes(
    monkeypatch: pytest.MonkeyPatch, repo: Path, tmp_path: Path, capsys: Any
) -> None:
    edit(repo / "stacks" / "local.yaml", "count: 4", "count: 5")
    assert _run_task(monkeypatch, repo, tmp_path, base="main", json=True) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == 1 and data["stack"] == "local" and data["pending"] is True
    assert data["base"] == "main" and data["new"] == "working tree"
    node5 = next(n for n in data["nodes"] if n["node"] == "node-005")
    assert node5["provision"] == "create" and node5["actions"][0] == "create" and node5["recertify"]
    assert set(node5) >= {
        "node",
        "pool",
        "role",
        "configure",
        "reboot",
        "drain",
        "jobs",
        "reasons",
        "changed",
    }
    assert data["counts"]["create"] == 1

    assert _run_task(monkeypatch, repo, tmp_path, base="main", format="markdown") == 2
    text = capsys.readouterr().out
    assert text.startswith("### clusterforge plan: stack `local`")
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    # 5 nodes reconfigure Slurm for the new one (the head, and the 4 compute nodes as one group),
    # plus the new one
    assert [row.split(" | ")[:2] for row in rows] == [["| `head-001`", "1"], ["| `node-[001-004]`", "4"],
                                                      ["| `node-005`", "1"]]  # fmt: skip
    assert all(line.count(" | ") == 8 for line in rows)


def test_markdown_escapes_pipes_and_lists_notes(repo: Path) -> None:
    result = _plan(repo)
    noted = type(result)(result.stack, "a|b", result.new, result.impacts, ("x | y",))
    text = markdown(noted)
    assert "a|b" in text and "> note: x \\| y" in text
    assert to_json(noted)["notes"] == ["x | y"]
    assert isinstance(LiveState().up, bool)


def test_a_record_that_cannot_be_made_never_fails_the_converge(tmp_path: Path, repo: Path) -> None:
    spec, _ = load_spec(repo / "stacks" / "local.yaml")
    (repo / "playbooks" / "site.yml").write_text("- hosts: [unclosed\n")
    journal = Journal("local", tmp_path / "state")
    why = record_converged(journal, spec, ["node-001"], root=repo)
    assert why.startswith("applied state not recorded: ")
    assert journal.record("node-001").applied == {}
