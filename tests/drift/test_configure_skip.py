"""`up`'s configure stage over fakes: converged nodes are skipped, a drifted one converges alone,
a digest that cannot be read converges, --converge converges all (stand-in playbooks, real
ansible-runner, a fake Slurm head, and a fake probe answering per node)."""

from __future__ import annotations

import json

import pytest

from clusterforge.drift.digest import PROBE_SOURCE
from clusterforge.drift.report import drift_report
from clusterforge.journal import Journal
from tests.pipeline.conftest import PLAYBOOKS, world  # noqa: F401 - the fixture, shared
from tests.pipeline.fakes import FakeSlurm
from tests.pipeline.test_up import run_up

NODES = ("head-001", "node-001", "node-002", "node-003")


class FakeFleet:
    """Answers the drift probe from per-node item states; all else goes to the fake Slurm."""

    def __init__(self, slurm: FakeSlurm) -> None:
        self.slurm = slurm
        self.states = {n: {"file /etc/slurm/slurm.conf": "sha256 aaaa mode 0644 owner 0:0"} for n in NODES}
        self.down: set[str] = set()  # nodes whose transport fails
        self.probed: list[str] = []

    def runner(self, node, timeout_s: float = 0):
        def run(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
            if argv[:3] == ["python3", "-c", PROBE_SOURCE]:
                self.probed.append(node.name)
                if node.name in self.down:
                    return 255, "", f"ssh: connect to host {node.name} port 22: Connection timed out"
                wanted = json.loads(argv[3])
                assert "file /etc/slurm/slurm.conf" in [f"file {f}" for f in wanted["files"]]
                return 0, json.dumps({"items": self.states[node.name], "errors": []}), ""
            return self.slurm(argv, stdin)

        return run


def report(world: dict, fleet: FakeFleet) -> list[dict]:  # noqa: F811
    return drift_report(world["spec"], world["provider"], fleet.runner, world["tmp"] / "inv", PLAYBOOKS)


@pytest.fixture
def fleet(world: dict) -> FakeFleet:  # noqa: F811
    fake = FakeFleet(world["slurm"])
    world["seams"].runner = fake.runner
    return fake


@pytest.mark.slow
def test_converged_nodes_skip_drifted_and_unreadable_converge(world: dict, fleet: FakeFleet) -> None:  # noqa: F811
    first, text = run_up(world)
    assert first.code == 0, text
    journal = Journal("pt-up")
    assert all(journal.record(n).drift["items"] for n in NODES)  # a baseline per converged node

    again, text = run_up(world)
    assert again.code == 0, text
    for n in NODES:
        assert again.progress[n].notes["configure"].startswith("unchanged since "), text
        assert again.progress[n].notes["configure"].endswith(", digest matches")
    assert again.changed == 0

    assert not any(r["converge"] for r in report(world, fleet))
    fleet.states["node-002"] = {"file /etc/slurm/slurm.conf": "sha256 bbbb mode 0644 owner 0:0"}
    fleet.down.add("node-003")
    rows = {r["node"]: r for r in report(world, fleet)}
    assert {n for n, r in rows.items() if r["converge"]} == {"node-002", "node-003"}
    assert rows["node-002"]["changes"] == ["file /etc/slurm/slurm.conf: content changed"]
    assert (
        Journal("pt-up").record("node-002").drift["items"] != fleet.states["node-002"]
    )  # drift changed nothing
    third, text = run_up(world)
    assert third.code == 0, text
    notes = {n: third.progress[n].notes["configure"] for n in NODES}
    assert notes["node-001"].startswith("unchanged since") and notes["head-001"].startswith("unchanged since")
    assert notes["node-002"].startswith("drift: file /etc/slurm/slurm.conf: content changed -> 0 changed")
    assert notes["node-003"].startswith("digest not gathered (probe exited 255: ssh: connect to host")
    assert "converging, not assumed clean -> 0 changed" in notes["node-003"]  # the stand-in is converged
    assert "drift: file /etc/slurm/slurm.conf: content changed" in text  # the summary says what changed
    # node-003's transport still fails after its converge: no baseline is trusted, so it converges
    # again next time; node-002's new state is its baseline now.
    assert Journal("pt-up").record("node-003").drift == {}
    assert "bbbb" in Journal("pt-up").record("node-002").drift["items"]["file /etc/slurm/slurm.conf"]

    fleet.down.clear()
    forced, text = run_up(world, converge=True)
    assert forced.code == 0, text
    assert all("--converge" in forced.progress[n].notes["configure"] for n in NODES), text
