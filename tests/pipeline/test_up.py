"""`up` and `certify` end to end over fakes: local-connection nodes, stand-in playbooks run by the
real ansible-runner, a fake Slurm head node. Streaming, quarantine, resume, drain with reason."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from clusterforge.journal import Journal
from clusterforge.pipeline.context import Options
from clusterforge.pipeline.scheduler import Status
from clusterforge.pipeline.up import certify, up
from clusterforge.status import collect
from tests.pipeline.fakes import FakeProvider, FakeSlurm

NODES = ["head-001", "node-001", "node-002", "node-003"]


def run_up(world: dict, **opts: bool):
    out = io.StringIO()
    outcome = up(world["spec"], Options(**opts), console=Console(file=out, width=200), seams=world["seams"])
    return outcome, out.getvalue()


@pytest.mark.slow
def test_up_admits_every_node_then_second_up_changes_and_certifies_nothing(world: dict) -> None:
    outcome, text = run_up(world)
    assert outcome.code == 0, text
    slurm: FakeSlurm = world["slurm"]
    assert {n: s["state"] for n, s in slurm.nodes.items()} == {f"node-00{i}": "idle" for i in (1, 2, 3)}
    assert slurm.reservation is None  # hold lifted
    # Pair tests in the hold: every node was tested with two different partners.
    partners = {n: {p for job in slurm.jobs if n in job for p in job if p != n} for n in slurm.nodes}
    assert all(len(p) == 2 for p in partners.values()), slurm.jobs
    # one marker per node (head included), and the stand-in munge key's first run: the cluster key made
    # and the controller's copy kept (two run_once tasks, tests/pipeline/playbooks/site.yml)
    assert outcome.changed == 4 + 2
    assert outcome.progress["node-001"].notes["configure"] == "1 changed: Converge a marker"
    assert "1 changed: Converge a marker; certified and admitted" in text
    journal = Journal("pt-up")
    assert all(journal.record(f"node-00{i}").verdict == "pass" for i in (1, 2, 3))
    assert (world["tmp"] / "inv" / "pt-up" / "hosts.yml").exists()
    html = world["tmp"] / "state" / "pt-up" / "reports" / "report.html"
    assert "node-003" in html.read_text() and f"reports: {html}" in text.replace("\n", "")
    rows = {r.node: r for r in collect(world["spec"], world["provider"], slurm.runner)}
    assert rows["node-002"].certification == "certified" and rows["node-002"].slurm_state == "idle"
    assert rows["node-002"].configured and rows["node-002"].provider_state == "running"
    assert rows["head-001"].slurm_state == ""  # the controller is not a Slurm compute node
    # One converge, inside the provider's hook (the local provider lifts the head's CPU cap there).
    assert world["provider"].converges == [("enter", NODES), ("exit", NODES)]
    calls_before = len(slurm.calls)
    again, text = run_up(world)
    assert again.code == 0, text
    assert again.changed == 0
    new_calls = slurm.calls[calls_before:]
    assert not any(c[0] in ("sbatch", "scontrol") for c in new_calls)  # nothing held, nothing certified
    assert "certified earlier" in text
    assert [kind for kind, _ in world["provider"].converges] == ["enter", "exit"] * 2  # each left again


@pytest.mark.slow
def test_configure_failure_and_dead_node_are_quarantined_then_recovered(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CF_TEST_FAIL_CONFIGURE", "node-002")
    monkeypatch.setenv("CF_TEST_DIE", "node-003")  # its container dies during certification
    world["provider"].die_after_create = {"node-003"}
    outcome, text = run_up(world)
    assert outcome.code == 1 and outcome.failed == ["node-002", "node-003"]
    dead = outcome.progress["node-003"]
    assert dead.stage == "certify" and "node exited during certification" in dead.reason, dead.reason
    assert world["slurm"].nodes["node-003"]["state"] == "drained"
    p = outcome.progress["node-002"]
    assert p.stage == "configure" and p.status is Status.FAILED
    assert "TASK [Install the pinned package] failed on node-002" in p.reason and "libnccl2" in p.reason
    slurm: FakeSlurm = world["slurm"]
    # never certified, never admitted: drained with why (issue 26), not with the role's "certifying"
    assert slurm.nodes["node-002"]["state"] == "drained"
    assert slurm.nodes["node-002"]["reason"].startswith(
        "clusterforge: configure: TASK [Install the pinned package] failed on node-002"
    ), slurm.nodes["node-002"]
    assert slurm.nodes["node-001"]["state"] == "idle"
    # fixed: the next `up` restarts node-003, converges node-002, and certifies both
    monkeypatch.setenv("CF_TEST_FAIL_CONFIGURE", "")
    monkeypatch.setenv("CF_TEST_DIE", "")
    again, text = run_up(world)
    assert again.code == 0, text
    assert slurm.nodes["node-002"]["state"] == "idle" and slurm.nodes["node-003"]["state"] == "idle"
    assert {n for job in slurm.jobs[-2:] for n in job} >= {"node-002", "node-003"}
    assert "certified earlier" in again.progress["node-001"].reason


@pytest.mark.slow
def test_certification_failure_drains_with_the_check(world: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CF_TEST_FAIL_CERT", "node-003")
    outcome, text = run_up(world)
    assert outcome.code == 1 and outcome.failed == ["node-003"]
    slurm: FakeSlurm = world["slurm"]
    assert slurm.nodes["node-003"] == {
        "state": "drained",
        "reason": "clusterforge: software-versions: nccl: 2.18.1 installed, 2.26.2 pinned",
    }
    assert slurm.nodes["node-001"]["state"] == "idle"
    assert not any("node-003" in job for job in slurm.jobs)  # the failed node is left out
    assert "software-versions" in text
    row = {r.node: r for r in collect(world["spec"], world["provider"], slurm.runner)}["node-003"]
    assert row.certification == "failed" and row.slurm_state == "drained"
    assert row.slurm_reason.startswith("clusterforge: software-versions")
    # The failure is a strike on the machine (clusterforge.health.record), kept after later passes.
    (strike,) = Journal("pt-up").section("health_strikes")
    assert strike["node"] == "node-003" and strike["check"] == "software-versions"
    assert strike["identity"] == Journal("pt-up").record("node-003").provider_id != ""
    html = (world["tmp"] / "state" / "pt-up" / "reports" / "report.html").read_text()
    assert "Incident history (1 node)" in html and "incidents: 1/3 in 7d, last 0 min ago" in html


@pytest.mark.slow
def test_the_report_shows_the_strikes_the_heads_loop_recorded(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the loop on, the head's journal holds strikes the workstation never saw (its scheduled checks):
    the report written at certify time asks the head for them, as `invoke status` does."""
    import json
    from datetime import UTC, datetime, timedelta

    from clusterforge.health.head_state import state_argv
    from clusterforge.health.loop.render import loop_enabled

    spec = world["spec"]
    active = spec.health.active.model_copy(update={"profile": "quick"})
    world["spec"] = spec.model_copy(update={"health": spec.health.model_copy(update={"active": active})})
    assert loop_enabled(world["spec"])
    monkeypatch.setenv("CF_TEST_FAIL_CERT", "node-003")
    at = (datetime.now(UTC) - timedelta(hours=2)).replace(microsecond=0).isoformat()
    head_strike = {"identity": "", "node": "node-001", "at": at, "check": "gloo-allreduce",
                   "reason": "clusterforge: gloo-allreduce: busbw 0.2 GB/s, 50 % under the baseline 0.4"}  # fmt: skip
    slurm: FakeSlurm = world["slurm"]
    base = slurm._answer

    def answer(argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        if argv == state_argv():
            head_strike["identity"] = Journal("pt-up").record("node-001").provider_id
            return 0, json.dumps({"health_strikes": [head_strike]}), ""
        return base(argv, stdin)

    slurm._answer = answer  # type: ignore[method-assign]
    outcome, text = run_up(world)
    assert outcome.failed == ["node-003"], text
    assert state_argv() in slurm.calls
    html = (world["tmp"] / "state" / "pt-up" / "reports" / "report.html").read_text()
    assert "Incident history (2 nodes)" in html  # node-003 (this run) and node-001 (the head's loop)
    assert "incidents: 1/3 in 7d, last 2 h ago" in html  # node-001: the head's strike alone
    assert "and, where the health loop runs, the head node's" in html


@pytest.mark.slow
def test_slow_network_drains_and_on_demand_certify_recovers(world: dict) -> None:
    slurm: FakeSlurm = world["slurm"]
    outcome, _ = run_up(world)
    assert outcome.code == 0
    slurm.slow = {"node-001"}
    out = io.StringIO()
    result = certify(world["spec"], ["node-001"], None, console=Console(file=out), seams=world["seams"])
    assert result.code == 1, out.getvalue()
    assert slurm.nodes["node-001"]["state"] == "drained"
    reason = slurm.nodes["node-001"]["reason"]
    # Judged with two known-good partners lent from the certified nodes, against the baseline
    # the first up recorded.
    assert reason.startswith(
        "clusterforge: gloo-allreduce: node fault, under the reference with every partner: 0.002 GB/s with node-00"
    ), reason
    assert "reference 0.45" in reason and "baseline" in reason, reason
    assert slurm.nodes["node-002"]["state"] == "idle"  # the lent partners went back to work
    assert slurm.nodes["node-003"]["state"] == "idle" and slurm.reservation is None
    slurm.slow = set()
    result = certify(
        world["spec"], ["node-001"], None, console=Console(file=io.StringIO()), seams=world["seams"]
    )
    assert result.code == 0 and slurm.nodes["node-001"]["state"] == "idle"


def test_dry_run_changes_nothing(world: dict) -> None:
    out = io.StringIO()
    outcome = up(
        world["spec"], Options(), dry_run=True, console=Console(file=out, width=200), seams=world["seams"]
    )
    assert outcome.code == 0
    assert world["provider"].created == 0 and not world["slurm"].calls
    assert "node-[001-003]" in out.getvalue() and "certify" in out.getvalue()
    assert not list((world["tmp"] / "state" / "pt-up").glob("journal.*"))


def test_unknown_node_for_certify_is_refused(world: dict) -> None:
    out = io.StringIO()
    outcome = certify(world["spec"], ["node-009"], None, console=Console(file=out), seams=world["seams"])
    assert outcome.code == 2 and "node-009" in out.getvalue()


@pytest.mark.slow
def test_failed_head_blocks_the_compute_nodes(world: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CF_TEST_FAIL_CONFIGURE", "head-001")
    outcome, _ = run_up(world)
    assert outcome.code == 1 and outcome.failed == ["head-001", "node-001", "node-002", "node-003"]
    assert "TASK [Install the pinned package] failed on head-001" in outcome.progress["head-001"].reason
    for node in ("node-001", "node-002", "node-003"):
        reason = outcome.progress[node].reason
        assert reason.startswith("head node head-001 failed") and "no Slurm controller" in reason
    assert not any(c[0] == "scontrol" for c in world["slurm"].calls)  # nothing held or admitted


@pytest.mark.slow
def test_compute_failures_that_stop_the_playbook_are_not_blamed_on_the_head(
    world: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every compute node fails the first play: Ansible ends the playbook before the head's plays.
    monkeypatch.setenv("CF_TEST_FAIL_CONFIGURE", "node-001,node-002,node-003")
    monkeypatch.setenv("CF_TEST_HEAD_LAST", "1")
    outcome, _ = run_up(world)
    for node in ("node-001", "node-002", "node-003"):
        assert outcome.progress[node].reason.startswith("TASK [Install the pinned package] failed on " + node)
    head = outcome.progress["head-001"].reason
    assert head.startswith(
        "site.yml stopped before this host's plays ran, after: TASK [Install the pinned package]"
    )


@pytest.mark.slow
def test_a_node_whose_slurmd_does_not_answer_fails_alone(world: dict) -> None:
    slurm: FakeSlurm = world["slurm"]
    slurm.silent = {"node-002"}  # registered and idle, but its probe job never finishes
    outcome, text = run_up(world)
    assert outcome.code == 1 and outcome.failed == ["node-002"], text
    assert slurm.nodes["node-002"]["state"] == "drained"
    reason = slurm.nodes["node-002"]["reason"]
    assert reason.startswith("clusterforge: slurmd-responding: ") and "controller" in reason
    assert slurm.nodes["node-001"]["state"] == "idle" and slurm.nodes["node-003"]["state"] == "idle"
    assert slurm.jobs and not any("node-002" in job for job in slurm.jobs)  # tested across the others
    assert slurm.reservation is None  # nobody left in the hold


@pytest.mark.slow
def test_a_node_slurm_has_down_fails_alone_without_a_probe(world: dict) -> None:
    slurm: FakeSlurm = world["slurm"]
    original = slurm._answer

    def answer(argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        rc, out, err = original(argv, stdin)
        if argv[0] == "sinfo" and slurm.reservation:  # after the hold: node-003's slurmd went away
            out = out.replace("node-003 maint", "node-003 idle*$")
        return rc, out, err

    slurm._answer = answer  # type: ignore[method-assign]
    outcome, text = run_up(world)
    assert outcome.failed == ["node-003"], text
    assert (
        "slurmd is not responding to the controller (sinfo state idle*$)" in slurm.nodes["node-003"]["reason"]
    )
    assert slurm.probed and "node-003" not in slurm.probed[0]


@pytest.mark.slow
def test_a_certification_cut_short_is_done_again_by_the_next_up(world: dict) -> None:
    outcome, _ = run_up(world)
    assert outcome.code == 0
    journal = Journal(world["spec"].stack)
    journal.annotate("node-002", certifying="20261201T100000Z")  # what a killed `certify` leaves
    again, text = run_up(world)
    assert again.code == 0, text
    assert "certified earlier" in again.progress["node-001"].reason
    assert again.progress["node-002"].reason == "certified and admitted"
    assert Journal(world["spec"].stack).record("node-002").certifying == ""


class RebootingProvider(FakeProvider):
    """An SSM-like provider: the driver role left a reboot on node-001 (issue 23: the pipeline owns
    reboots where the connection cannot survive one); node-003 never comes back."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[list[str]] = []

    def reboot_pending(self, spec, nodes, runner):
        self.asked.append(sorted(n.name for n in nodes))
        return ["node-001"], {"node-003": "SSM agent not online after 1800 s (instance id-node-003)"}


@pytest.mark.slow  # the pipeline end to end with ansible-playbook
def test_nodes_the_driver_left_a_reboot_are_rebooted_and_converged_again(world: dict) -> None:
    provider = RebootingProvider()
    world["seams"].provider = provider
    outcome, text = run_up(world)
    assert provider.asked == [["node-001", "node-002", "node-003"]]  # every converged compute node, once
    assert "rebooted into the installed driver: converging again" in " ".join(text.split())
    journal = Journal("pt-up")
    assert journal.is_done("node-001", "configured") and journal.is_done("node-002", "configured")
    assert "reboot: SSM agent not online after 1800 s" in " ".join(text.split())
    assert outcome.code == 1  # node-003 failed, the others went on
