"""health.plan from a journal as the pipeline writes it: verdicts, failed GPUs, the loop's strikes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from invoke.exceptions import Exit

from clusterforge.health.plan import health_plan
from clusterforge.health.state import HEALTH_STRIKES, epoch, read_inputs
from clusterforge.journal import STATE_ROOT_ENV, Journal
from clusterforge.spec.loader import load_spec
from clusterforge.tasks import health as health_task

STACKS = Path(__file__).resolve().parents[2] / "stacks"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC).timestamp()


def iso(days_ago: float) -> str:
    return datetime.fromtimestamp(NOW - days_ago * 86400, UTC).replace(microsecond=0).isoformat()


def journal(root: Path) -> Journal:
    j = Journal("prod", root)
    for n in range(1, 17):
        name = f"gpu-{n:03d}"
        j.observe(name, f"i-0{n:016x}")
        j.mark_done(name, "certified", verdict="pass", certified_at=iso(1), profile="production")
        j.record_certified(
            name, {}, {"provider_id": f"i-0{n:016x}", "gpus": [f"GPU-{n:08d}-0000-0000-0000-000000000000"]}
        )
    j.mark_failed(
        "gpu-002",
        "certified",
        "clusterforge: xid-scan: Xid 79 on 0000:44:00",
        verdict="fail",
        certified_at=iso(0.5),
    )
    lemon_gpu = "GPU-00000003-0000-0000-0000-000000000000"
    j.set_section(
        HEALTH_STRIKES,
        [
            {"identity": lemon_gpu, "node": "gpu-003", "at": iso(d), "reason": "clusterforge: ecc: +1"}
            for d in (0.2, 2, 5)
        ],
    )
    return j


@pytest.fixture
def prod_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Journal:
    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    return journal(tmp_path / "state")


def test_failed_node_is_recertified_lemon_flagged_rest_kept(prod_journal: Journal) -> None:
    spec, _ = load_spec(STACKS / "prod.yaml")
    inputs = read_inputs(spec, prod_journal.nodes, prod_journal.sections)
    result = health_plan(spec.health, inputs, NOW)
    actions = {d.node: d.action for d in result.decisions}
    assert actions["gpu-002"] == "recertify"
    assert actions["gpu-003"] == "flag-rma"  # 3 strikes in 7 d on its GPU; policy default: flag, not replace
    assert {a for n, a in actions.items() if n not in ("gpu-002", "gpu-003")} == {"keep"}
    assert result.lemons["gpu-003"].identity == "GPU-00000003-0000-0000-0000-000000000000"
    assert result.mtbi_s["gpu-003"] == pytest.approx((5 - 0.2) * 86400 / 2)
    assert result.active == []  # no health.active.profile: no scheduled checks


def test_the_policy_replaces_only_when_it_says_so_and_schedules_oldest_first(
    prod_journal: Journal, tmp_path: Path
) -> None:
    text = (STACKS / "prod.yaml").read_text() + (
        "health:\n  active: {profile: production, every: 12h, max_nodes: 2}\n  pools:\n    gpu: {on_lemon: replace}\n"
    )
    path = tmp_path / "prod.yaml"
    path.write_text(text)
    spec, _ = load_spec(path)
    prod_journal.mark_done("gpu-009", "certified", verdict="pass", certified_at=iso(3), profile="production")
    result = health_plan(spec.health, read_inputs(spec, prod_journal.nodes, prod_journal.sections), NOW)
    assert {d.node: d.action for d in result.decisions}["gpu-003"] == "replace"
    prod_journal.mark_done("gpu-001", "certified", verdict="pass", certified_at=iso(4), profile="production")
    result = health_plan(spec.health, read_inputs(spec, prod_journal.nodes, prod_journal.sections), NOW)
    assert result.active == ["gpu-001", "gpu-009"]  # oldest-checked first
    everyone = spec.health.model_copy(
        update={"active": spec.health.active.model_copy(update={"max_nodes": "100%"})}
    )
    taken = health_plan(everyone, read_inputs(spec, prod_journal.nodes, prod_journal.sections), NOW).active
    assert len(taken) == 14 and "gpu-002" not in taken and "gpu-003" not in taken  # failed, lemon


def test_the_task_prints_json_and_insists_on_dry_run(
    prod_journal: Journal, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(Exit, match="--dry-run"):
        health_task.plan.body(None, stack="prod")
    health_task.plan.body(None, stack="prod", dry_run=True, json=True)
    data = json.loads(capsys.readouterr().out)
    by_node = {d["node"]: d for d in data["decisions"]}
    assert by_node["gpu-003"]["lemon"] is True and by_node["gpu-003"]["strikes"] == 3
    assert by_node["gpu-002"]["action"] == "recertify"


def test_a_bad_health_section_is_a_spec_error(tmp_path: Path) -> None:
    from clusterforge.spec.loader import SpecError

    path = tmp_path / "prod.yaml"
    path.write_text((STACKS / "prod.yaml").read_text() + "health:\n  strikes: {count: 3, windw: 7d}\n")
    with pytest.raises(SpecError) as exc:
        load_spec(path)
    assert any("windw" in f.render() for f in exc.value.findings)


def test_epoch_reads_the_journal_time_and_nothing_else() -> None:
    assert epoch(iso(0)) == NOW
    assert epoch("") is None and epoch("yesterday") is None
