"""The workstation reads what the head's health loop asks for, and `invoke replace --requested` does it
once per hardware identity (clusterforge/health/head_state.py): from a real round of the loop against
the fake head, through the loop's `--state` output, to the replace task with the rollout stubbed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from invoke import Context
from invoke.exceptions import Exit

from clusterforge.health import head_state
from clusterforge.health.head_state import (
    HEAD_PYTHON,
    REPLACED,
    HeadStateError,
    open_requests,
    parse_state,
    read_head_state,
    state_argv,
)
from clusterforge.health.loop.__main__ import main as loop_main
from clusterforge.health.loop.config import LoopConfig
from clusterforge.journal import Journal
from clusterforge.providers.base import Node
from tests.health.fake_head import FakeHead
from tests.health.test_loop import _raw, call_head, config, round_

ROOT = Path(__file__).resolve().parents[2]


def test_the_head_python_is_the_slurm_roles() -> None:
    defaults = yaml.safe_load((ROOT / "roles/slurm/defaults/main.yml").read_text())
    assert defaults["slurm_health_loop_python"] == HEAD_PYTHON


def lemon_state(tmp_path: Path, clock: Any) -> tuple[LoopConfig, Path]:
    """A round history that makes node-001 a lemon of a pool whose policy says replace (no hook), and
    the loop's configuration file as the role writes it."""
    cfg = config(
        tmp_path,
        strikes={"count": 2, "window": "7d"},
        pools={"gpu": {"recertify_suite": "full", "on_lemon": "replace"}},
    )
    head = FakeHead(["node-001", "node-002", "node-003", "node-004"])
    round_(cfg, head, clock)
    head.finish("node-001", passed=False, reason="clusterforge: matmul-burnin: 31 % under the baseline")
    round_(cfg, call_head(head, head.__call__), clock)
    round_(cfg, call_head(head, head.__call__), clock)
    head.finish("node-001", passed=False, reason="clusterforge: matmul-burnin: 33 % under the baseline")
    round_(cfg, call_head(head, head.__call__), clock)
    path = tmp_path / "health-loop.json"
    path.write_text(json.dumps(_raw(cfg)))
    return cfg, path


@pytest.fixture
def clock() -> Any:
    from tests.health.test_loop import Clock

    return Clock()


def test_the_loops_state_is_what_the_workstation_parses(
    tmp_path: Path, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _, path = lemon_state(tmp_path, clock)
    assert loop_main(["--config", str(path), "--state"]) == 0
    state = parse_state(capsys.readouterr().out)
    (request,) = state.replace_requested.values()
    assert (request.node, request.identity, request.strikes) == ("node-001", "c-node-001", 2)
    assert request.why.startswith("lemon (2 strikes")
    assert [(s["identity"], s["reason"][-20:]) for s in state.strikes] == [
        ("c-node-001", "31 % under the baseline"[-20:]),
        ("c-node-001", "33 % under the baseline"[-20:]),
    ]


def test_state_before_any_round_is_empty(
    tmp_path: Path, clock: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = config(tmp_path)
    path = tmp_path / "health-loop.json"
    path.write_text(json.dumps(_raw(cfg)))
    assert loop_main(["--config", str(path), "--state"]) == 0
    state = parse_state(capsys.readouterr().out)
    assert not state.replace_requested and not state.strikes and not state.notes
    assert not (cfg.state_dir / cfg.stack / "journal.json").exists()  # looking created nothing


@pytest.mark.parametrize(
    ("stdout", "named"),
    [
        ("Traceback (most recent call last):", "not JSON"),
        ("[]", "not a JSON object"),
        ('{"replace_requested": ["node-001"]}', "replace_requested is list"),
    ],
)
def test_an_answer_that_is_not_the_loops_state_is_named(stdout: str, named: str) -> None:
    with pytest.raises(HeadStateError, match=named):
        parse_state(stdout, "head-001")


def test_a_request_without_identity_is_a_note_never_a_replace() -> None:
    state = parse_state(json.dumps({"replace_requested": {"node-002": {"why": "x"}, "node-003": "junk"}}))
    assert not state.replace_requested
    assert [n.split(":")[0] for n in state.notes] == [
        "replace_requested.node-002",
        "replace_requested.node-003",
    ]


def running_head(name: str = "head-001", state: str = "running") -> dict[str, Node]:
    return {name: Node(name, "10.0.0.2", "head", "head", "local", {}, state=state)}


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ((127, "", "exec: /opt/clusterforge/venv/bin/python: not found"), "health loop is not installed"),
        (
            (1, "", "health loop: /etc/clusterforge/health-loop.json: cannot read: No such file"),
            "not configured",
        ),
        ((0, "{bad", ""), "not JSON"),
    ],
)
def test_a_head_that_cannot_answer_says_why(answer: tuple[int, str, str], said: str) -> None:
    asked: list[list[str]] = []

    def runner(node: Node, timeout_s: float = 0) -> Any:
        return lambda argv, stdin=None: (asked.append(argv), answer)[1]

    state, why = read_head_state(running_head(), ["head-001"], runner)
    assert state is None and said in why and why.startswith("head-001")
    assert asked == [state_argv()]


def test_no_running_head_is_said() -> None:
    state, why = read_head_state(running_head(state="stopped"), ["head-001"])
    assert state is None and why == "no running head node"


def test_a_request_is_open_until_a_replace_for_its_identity_is_recorded(tmp_path: Path) -> None:
    journal = Journal("t", tmp_path)
    answer = {"replace_requested": {"node-001": {"identity": "c-1", "strikes": 3, "why": "w", "at": "t"}}}
    state = parse_state(json.dumps(answer))
    assert [r.node for r in open_requests(state, journal)] == ["node-001"]
    head_state.record_replaced(journal, state.replace_requested["node-001"], "2026-12-05T10:00:00+00:00")
    assert open_requests(state, Journal("t", tmp_path)) == []
    # the new machine became a lemon too: a request for another identity is open again
    answer["replace_requested"]["node-001"]["identity"] = "c-2"
    assert [r.identity for r in open_requests(parse_state(json.dumps(answer)), journal)] == ["c-2"]


def test_replace_requested_replaces_each_open_request_once_and_a_failure_stays_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusterforge.rollout import replace as rollout_replace
    from clusterforge.tasks import upgrade

    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    answer = {
        "replace_requested": {
            "node-001": {"identity": "c-1", "strikes": 3, "why": "matmul 33 % under", "at": "t1"},
            "node-002": {"identity": "c-2", "strikes": 3, "why": "xid 79", "at": "t2"},
        }
    }
    monkeypatch.setattr(
        head_state, "read_stack_head_state", lambda spec: (parse_state(json.dumps(answer)), "")
    )
    replaced: list[str] = []

    class Outcome:
        def __init__(self, code: int) -> None:
            self.code = code

    def fake_replace(cluster: Any, node: str, *, force: bool = False, yes: bool = False) -> Outcome:
        replaced.append(node)
        return Outcome(1 if node == "node-001" else 0)  # node-001's new machine fails its certification

    monkeypatch.setattr(rollout_replace, "replace", fake_replace)
    spec = str(ROOT / "stacks" / "local.yaml")
    with pytest.raises(Exit) as failed:
        upgrade.replace(Context(), spec=spec, requested=True, yes=True)
    assert failed.value.code == 1 and replaced == ["node-001", "node-002"]  # one failure stops nothing
    out = capsys.readouterr()
    assert "asks to replace 2 node(s)" in out.out and "node-001: the replace exited 1" in out.err
    stack = Journal("local", tmp_path / "state")
    assert set(stack.section(REPLACED)) == {"node-002"}
    replaced.clear()
    with pytest.raises(Exit):
        upgrade.replace(Context(), spec=spec, requested=True, yes=True)
    assert replaced == ["node-001"]  # node-002's request was done; node-001's is tried again


def test_replace_wants_a_node_or_the_requests_not_both() -> None:
    from clusterforge.tasks import upgrade

    for kwargs in ({}, {"node": "node-001", "requested": True}):
        with pytest.raises(Exit) as refused:
            upgrade.replace(Context(), stack="local", **kwargs)
        assert refused.value.code == 2 and "--requested" in str(refused.value)


def test_status_counts_the_head_loops_strikes_beside_the_workstations_once_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime, timedelta

    from clusterforge.health.loop.render import loop_enabled
    from clusterforge.health.state import HEALTH_STRIKES
    from clusterforge.spec.loader import load_spec
    from clusterforge.status import collect
    from tests.pipeline.fakes import FakeProvider, FakeSlurm

    monkeypatch.setenv("CLUSTERFORGE_STATE_DIR", str(tmp_path / "state"))
    spec, _ = load_spec(ROOT / "stacks" / "local.yaml")
    active = spec.health.active.model_copy(update={"profile": "quick"})
    spec = spec.model_copy(update={"health": spec.health.model_copy(update={"active": active})})
    assert loop_enabled(spec)
    provider = FakeProvider()
    provider.create(spec)
    slurm = FakeSlurm()
    for name in ("node-001", "node-002"):
        slurm.register(name)
    hour = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)

    def strike(hours: int, why: str) -> dict[str, str]:
        at = (hour - timedelta(hours=hours)).isoformat()
        return {"identity": "id-node-002", "node": "node-002", "at": at, "reason": why, "check": "xid"}

    seen_by_both = strike(5, "clusterforge: xid: 79 (GPU fell off the bus)")
    journal = Journal(spec.stack)
    for name in ("node-001", "node-002"):  # the machine the strikes are recorded against
        journal.annotate(name, provider_id=f"id-{name}", verdict="pass", certified_at=hour.isoformat())
    journal.set_section(HEALTH_STRIKES, [seen_by_both])
    head_answer = {"health_strikes": [seen_by_both, strike(1, "clusterforge: ecc: 3 new uncorrectable")]}
    base = slurm._answer

    def answer(argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        return (0, json.dumps(head_answer), "") if argv == state_argv() else base(argv, stdin)

    slurm._answer = answer  # type: ignore[method-assign]
    rows = {r.node: r for r in collect(spec, provider, slurm.runner)}
    assert rows["node-002"].strikes.startswith("2/"), rows["node-002"].strikes
    assert state_argv() in slurm.calls
    # a spec that does not run the loop never asks the head
    slurm.calls.clear()
    plain = spec.model_copy(
        update={
            "health": spec.health.model_copy(
                update={"active": spec.health.active.model_copy(update={"profile": None})}
            )
        }
    )
    rows = {r.node: r for r in collect(plain, provider, slurm.runner)}
    assert rows["node-002"].strikes.startswith("1/") and state_argv() not in slurm.calls
