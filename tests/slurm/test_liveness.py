"""Does each node answer the controller: Slurm state first, then a probe job per node."""

from __future__ import annotations

import pytest

from clusterforge.slurm import liveness
from clusterforge.slurm.admission import ControllerError
from clusterforge.slurm.parse import parse_sinfo

# Shapes as Slurm 22.05 prints them (tests/data/slurm/): `*` not responding, `$` maintenance.
SINFO = """\
node-001 maint none
node-002 idle*$ none
node-003 down$ Not responding
node-004 maint none
"""


def test_state_problems_name_the_state() -> None:
    states = parse_sinfo(SINFO)
    assert liveness.state_problem("node-001", states["node-001"]) == ""
    assert "not responding to the controller (sinfo state idle*$)" in liveness.state_problem(
        "node-002", states["node-002"]
    )
    assert "DOWN" in liveness.state_problem("node-003", states["node-003"])
    assert "Not responding" in liveness.state_problem("node-003", states["node-003"])
    assert "not registered" in liveness.state_problem("node-009", None)


def test_parse_probe_reads_each_node() -> None:
    out = "node-001 0\nnode-004 124\nnode-005 1\n"
    problems = liveness.parse_probe(out, ["node-001", "node-004", "node-005", "node-006"], 45)
    assert set(problems) == {"node-004", "node-005", "node-006"}
    assert "within 45 s" in problems["node-004"] and "srun exit 1" in problems["node-005"]
    assert "no answer" in problems["node-006"]


def test_unresponsive_probes_only_nodes_slurm_thinks_are_up_and_cancels_leftovers() -> None:
    calls: list[tuple[list[str], str | None]] = []

    def head(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        calls.append((argv, stdin))
        if argv[:3] == ["sh", "-c", liveness.PROBE_SCRIPT]:
            return 0, "node-001 0\nnode-004 124\n", ""
        return 0, "Slurmctld(primary) at head-001 is UP\n" if argv == ["scontrol", "ping"] else "", ""

    states = parse_sinfo(SINFO)
    found = liveness.unresponsive(
        head, states, ["node-001", "node-002", "node-003", "node-004"], "res", "probe-x"
    )
    assert set(found) == {"node-002", "node-003", "node-004"}
    probe, names = calls[0]
    assert probe[3:] == ["sh", "res", str(liveness.PROBE_TIMEOUT_S), "probe-x", str(liveness.PROBE_PARALLEL)]
    assert names == "node-001\nnode-004\n"  # on stdin: any number of nodes, no giant argument
    assert calls[-1][0] == ["scancel", "--name=probe-x"]


def test_a_probe_that_cannot_run_fails_the_probed_nodes_with_the_reason() -> None:
    def head(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        if argv == ["scontrol", "ping"]:
            return 0, "Slurmctld(primary) at head-001 is UP\n", ""
        return 127, "", "sh: 1: srun: not found"

    found = liveness.unresponsive(head, parse_sinfo("node-001 maint none\n"), ["node-001"], "r", "p")
    assert "cannot run the probe job" in found["node-001"] and "srun: not found" in found["node-001"]


def test_probes_that_fail_because_the_controller_is_down_fail_no_node() -> None:
    def head(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        if argv == ["scontrol", "ping"]:  # scontrol(1) ping: exit 1 when no controller answers
            return 1, "Slurmctld(primary) at head-001 is DOWN\n", ""
        names = (stdin or "").split()
        return 0, "".join(f"{n} 1\n" for n in names), ""  # srun: Unable to contact slurm controller

    with pytest.raises(ControllerError, match="head-001 is DOWN"):
        liveness.unresponsive(head, parse_sinfo("node-001 maint none\nnode-002 maint none\n"),
                              ["node-001", "node-002"], "r", "p")  # fmt: skip


def test_the_probe_script_runs_every_node_and_reports_each(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess

    fake = tmp_path / "srun"  # a stand-in srun: fails on node-b, hangs on node-c
    fake.write_text(
        '#!/bin/sh\nfor a; do case "$a" in node-b) exit 3;; node-c) sleep 30;; esac; done\nexit 0\n'
    )
    fake.chmod(0o755)
    argv = liveness.probe_argv("res", "probe", 1, parallel=2)  # node-c waits for a slot, then times out
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(argv, input=liveness.probe_stdin(["node-a", "node-b", "node-c"]), capture_output=True,
                         text=True, env=env, timeout=20, check=True).stdout  # fmt: skip
    assert sorted(out.split("\n")[:-1]) == ["node-a 0", "node-b 3", "node-c 124"]


def test_probes_that_all_failed_are_run_once_more_when_the_controller_answers_again() -> None:
    probes: list[str | None] = []

    def head(argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        if argv == ["scontrol", "ping"]:
            return 0, "Slurmctld(primary) at head-001 is UP\n", ""  # back by the time it is asked
        if argv[:3] == ["sh", "-c", liveness.PROBE_SCRIPT]:
            probes.append(stdin)
            code = 1 if len(probes) == 1 else 0
            return 0, "".join(f"{n} {code}\n" for n in (stdin or "").split()), ""
        return 0, "", ""

    states = parse_sinfo("node-001 maint none\nnode-002 maint none\n")
    assert liveness.unresponsive(head, states, ["node-001", "node-002"], "r", "p") == {}
    assert len(probes) == 2
