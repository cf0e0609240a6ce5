"""health.plan from a journal as the pipeline writes it: verdicts, failed GPUs, the loop's strikes."""

from __future__ import annotations

import json
import time
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
# The task reads the real clock: strikes are dated from it, so the 7-day window holds on any day.
NOW = float(int(time.time()))


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


def test_each_failure_is_a_strike_on_its_hardware_even_after_a_later_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clusterforge.health.record import identities_for, record_failure

    monkeypatch.setenv(STATE_ROOT_ENV, str(tmp_path / "state"))
    j = journal(tmp_path / "state")
    gpu = "GPU-00000005-0000-0000-0000-000000000000"
    for days in (3, 2):  # two failures, each followed by a pass: the verdict alone would show none
        reason = "clusterforge: xid-scan: Xid 79 on 0000:44:00"
        j.mark_failed("gpu-005", "certified", reason, verdict="fail", certified_at=iso(days))
        record_failure(j, "gpu-005", reason, "xid-scan", at=iso(days))
        j.mark_done(
            "gpu-005", "certified", verdict="pass", certified_at=iso(days - 0.5), profile="production"
        )
    j.mark_failed(
        "gpu-005",
        "certified",
        f"clusterforge: gpu-health: {gpu}: +1 ECC",
        verdict="fail",
        certified_at=iso(0.1),
    )
    record_failure(j, "gpu-005", f"clusterforge: gpu-health: {gpu}: +1 ECC", "gpu-health", at=iso(0.1))
    assert identities_for(f"x {gpu}", "i-0abc") == [gpu] and identities_for("x", "i-0abc") == ["i-0abc"]
    spec, _ = load_spec(STACKS / "prod.yaml")
    inputs = read_inputs(spec, j.nodes, j.sections)
    mine = [s for s in inputs.strikes if s.node == "gpu-005"]
    assert len(mine) == 3  # the last verdict's failure is not counted twice
    verdict = health_plan(spec.health, inputs, NOW).lemons["gpu-005"]
    assert verdict.lemon is False and verdict.strikes == 2  # 2 on the machine, 1 on the GPU: none holds 3
    record_failure(j, "gpu-005", "clusterforge: nccl: slow", "nccl", at=iso(0.05))
    assert health_plan(spec.health, read_inputs(spec, j.nodes, j.sections), NOW).lemons["gpu-005"].lemon
    # strikes are appended in time order, so an expired one is the oldest, first
    old = {"identity": "x", "node": "n", "at": "2000-01-01T00:00:00+00:00"}
    j.set_section(HEALTH_STRIKES, [old, *j.section(HEALTH_STRIKES)])
    record_failure(j, "gpu-005", "clusterforge: nccl: slow again", "nccl")  # prunes entries over 90 days old
    assert all(e["identity"] != "x" for e in j.section(HEALTH_STRIKES))


def test_status_history_line_per_node(prod_journal: Journal) -> None:
    from clusterforge.health.history import node_history

    spec, _ = load_spec(STACKS / "prod.yaml")
    history = node_history(spec, prod_journal.nodes, prod_journal.sections, NOW)
    assert history == {
        "gpu-002": "1/3 in 7d, last 12 h ago",
        "gpu-003": "LEMON 3/3 in 7d, last 5 h ago, MTBI 2.4 d",
    }
    assert list(history) == ["gpu-003", "gpu-002"]  # the lemon first, whatever the names


def test_slurm_view_passive_drains_and_idle_nodes(prod_journal: Journal) -> None:
    from clusterforge.health.live import passive_reason, with_slurm
    from clusterforge.slurm.parse import parse_sinfo

    # Captured sinfo rows (tests/data/slurm/README.md) renamed onto prod's nodes, and a passive-check drain.
    idle = parse_sinfo(
        (STACKS.parent / "tests/data/slurm/sinfo-idle.txt").read_text().replace("node-", "gpu-")
    )
    draining = parse_sinfo(
        (STACKS.parent / "tests/data/slurm/sinfo-draining.txt").read_text().replace("node-", "gpu-")
    )
    passive = parse_sinfo(
        "gpu-004 drained clusterforge: xid: Xid 79 x12 on 0000:44:00 (node fault): GPU has fallen off\n"
    )
    sinfo = {**idle, "gpu-003": draining["gpu-002"], **passive}  # gpu-001, gpu-002 idle
    assert passive_reason(sinfo["gpu-004"].reason) and not passive_reason(sinfo["gpu-003"].reason)
    spec, _ = load_spec(STACKS / "prod.yaml")
    inputs = with_slurm(read_inputs(spec, prod_journal.nodes, prod_journal.sections), sinfo, NOW)
    everyone = spec.health.model_copy(
        update={
            "active": spec.health.active.model_copy(update={"profile": "production", "max_nodes": "100%"})
        }
    )
    result = health_plan(everyone, inputs, NOW)
    actions = {d.node: d.action for d in result.decisions}
    assert actions["gpu-004"] == "recertify"  # drained on the node by the passive check: re-certify it
    assert actions["gpu-002"] == "drain"  # the journal's failure, yet Slurm serves it: drain first
    assert result.active == ["gpu-001"]  # idle in Slurm and kept; gpu-005..016 are not in sinfo: not idle
    assert any("12 node(s) not known to Slurm" in n for n in result.notes)


def test_live_without_a_head_node_says_so(prod_journal: Journal, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health_task, "_slurm_view", lambda spec: ({}, "no running head node"))
    result = health_task.build(STACKS / "prod.yaml", now=NOW, live=True)
    assert result.notes[-1] == "Slurm not asked (no running head node): idle nodes from the journal only"
    assert {d.node: d.action for d in result.decisions}["gpu-002"] == "recertify"
