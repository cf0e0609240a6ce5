"""A fake provider (local-connection "nodes") and a fake Slurm head node for pipeline tests.

The fake Slurm answers in the formats captured from Slurm 22.05 (tests/data/slurm/): sinfo
``%N %T %E`` rows with the ``$`` maintenance suffix, ``scontrol show reservation`` records, and it
refuses to RESUME a node that is not drained, as the real one does. Node lists are Slurm host
lists; an update of several nodes goes on past a node it refuses and stops at the first name it
does not know (slurmctld's update_node, src/slurmctld/node_mgr.c of 22.05). ``controller_down``
makes every Slurm command fail as the commands do without a controller, and ``scontrol ping``
say so.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from clusterforge.certify.network import jobs as group_jobs
from clusterforge.providers.base import DestroySummary, Node, PlannedNode, Problem, no_progress
from clusterforge.slurm import admission, liveness
from clusterforge.slurm.parse import expand_hostlist
from clusterforge.spec.models import ClusterSpec
from tests.fixtures import reports as fake_reports


class FakeProvider:
    def __init__(self) -> None:
        self.created = 0
        self.states: dict[str, str] = {}
        self.die_after_create: set[str] = set()  # these "containers" exit once looked at again
        self.converges: list[tuple[str, list[str]]] = []  # ("enter" | "exit", nodes) per converge

    @contextmanager
    def converging(self, spec: ClusterSpec, nodes: Iterable[str], note: object = None) -> Iterator[list[str]]:
        """The local provider's hook around a converge (it lifts the head nodes' CPU cap): recorded."""
        names = sorted(nodes)
        self.converges.append(("enter", names))
        try:
            yield []
        finally:
            self.converges.append(("exit", names))

    def preflight(self, spec: ClusterSpec) -> list[Problem]:
        return []

    def plan(self, spec: ClusterSpec) -> list[PlannedNode]:
        return [
            PlannedNode(
                name, pool.name, pool.role, pool.instance_type, "keep" if name in self.states else "create"
            )
            for pool in spec.node_pools
            for name in spec.node_names(pool)
        ]

    def _node(self, p: PlannedNode, i: int) -> Node:
        conn = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        return Node(
            p.name,
            f"10.9.0.{10 + i}",
            p.pool,
            p.role,
            p.instance_type,
            conn,
            f"id-{p.name}",
            self.states[p.name],
        )

    def create(self, spec: ClusterSpec, progress=no_progress) -> list[Node]:
        self.created += 1
        for p in self.plan(spec):
            if self.states.get(p.name) != "running":
                progress(p.name, "starting")
            self.states[p.name] = "running"
        return [self._node(p, i) for i, p in enumerate(self.plan(spec)) if p.name in self.states]

    def nodes(self, spec: ClusterSpec) -> list[Node]:
        for name in self.die_after_create:
            self.states[name] = "exited"
        self.die_after_create = set()
        return [self._node(p, i) for i, p in enumerate(self.plan(spec)) if p.name in self.states]

    def destroy(self, spec: ClusterSpec) -> DestroySummary:
        names = sorted(self.states)
        self.states.clear()
        return DestroySummary(containers=names)


class FakeSlurm:
    """The head node: sinfo, scontrol, sbatch (runs the network check at once), a tiny shared fs."""

    def __init__(self, slow: set[str] | None = None, nodes: dict[str, tuple[str, str]] | None = None) -> None:
        # nodes: name -> (sinfo state, reason), for tests that start from a given cluster
        self.nodes: dict[str, dict[str, str]] = {
            n: {"state": s, "reason": r} for n, (s, r) in (nodes or {}).items()
        }
        self.reservation: list[str] | None = None
        self.files: dict[str, str] = {}
        self.calls: list[list[str]] = []
        self.slow = slow or set()
        self.silent: set[str] = set()  # nodes whose slurmd does not answer (probe jobs time out)
        self.slow_links: list[tuple[str, str]] = []  # pairs slow together only (a fabric fault)
        self.dead: set[str] = set()  # nodes that write no report (their job lost them)
        self.jobs: list[list[str]] = []  # every group job's nodes, in order
        self.probed: list[list[str]] = []  # the nodes of each probe command
        self.controller_down = False  # slurmctld stopped: every Slurm command fails
        self.refuse_drain: set[str] = set()  # nodes whose DRAIN the controller refuses
        self.lock = threading.Lock()

    def register(self, name: str) -> None:
        # The Slurm role holds a new compute node before its slurmd first starts.
        self.nodes.setdefault(name, {"state": "drained", "reason": "clusterforge: certifying"})

    def runner(self, node: Node, timeout_s: float = 0):
        return self

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        with self.lock:
            self.calls.append(list(argv))
            return self._answer(argv, stdin)

    def _answer(self, argv: list[str], stdin: str | None) -> tuple[int, str, str]:
        args = dict(a.split("=", 1) for a in argv if "=" in a and not a.startswith("-"))
        if argv == admission.PING:
            state = "DOWN" if self.controller_down else "UP"
            return int(self.controller_down), f"Slurmctld(primary) at head-001 is {state}\n", ""
        slurm_command = argv[0] in ("sinfo", "scontrol", "sbatch", "squeue", "scancel", "srun") or argv[:3] in (
            ["sh", "-c", liveness.PROBE_SCRIPT], ["sh", "-c", admission.DRAIN_SCRIPT])  # fmt: skip
        if self.controller_down and slurm_command:
            return 1, "", f"{argv[0]}: error: Unable to contact slurm controller (connect failure)\n"
        if argv[:3] == ["sh", "-c", admission.DRAIN_SCRIPT]:
            out = []
            for line in (stdin or "").splitlines():
                nodes, reason = line.split("\t", 1)
                rc, _, err = self._update_nodes(nodes, "DRAIN", reason)
                out.append(f"{rc}\t{nodes}\t{err.strip()}")
            return 0, "".join(f"{row}\n" for row in out), ""
        if argv[0] == "sinfo":
            rows = []
            held = set(self.reservation or ())
            for name, n in sorted(self.nodes.items()):
                state = n["state"]
                if name in held:
                    state = "maint" if state == "idle" else state + "$"
                rows.append(f"{name} {state} {n['reason'] or 'none'}")
            return 0, "\n".join(rows) + "\n", ""
        if argv[:3] == ["scontrol", "show", "reservation"]:
            if not self.reservation:
                return 0, "No reservations in the system\n", ""
            return (
                0,
                (
                    f"ReservationName=clusterforge_cert StartTime=2026-11-30T03:29:04 EndTime=2026-11-30T05:29:04 Duration=02:00:00\n"
                    f"   Nodes={','.join(self.reservation)} NodeCnt={len(self.reservation)} Flags=MAINT,IGNORE_JOBS,SPEC_NODES\n"
                    "   State=ACTIVE\n\n"
                ),
                "",
            )
        if argv[:3] == ["scontrol", "create", "reservation"]:
            assert self.reservation is None, "the hold reservation is created once, then updated"
            assert "Flags=MAINT,IGNORE_JOBS" in argv and "Users=root" in argv
            self.reservation = expand_hostlist(args["Nodes"])
            return 0, "Reservation created: clusterforge_cert\n", ""
        if argv[:2] == ["scontrol", "delete"]:
            self.reservation = None
            return 0, "", ""
        if argv[:2] == ["scontrol", "update"] and "ReservationName" in args:
            self.reservation = expand_hostlist(args["Nodes"])
            return 0, "Reservation updated.\n", ""
        if argv[:2] == ["scontrol", "update"]:
            return self._update_nodes(args["NodeName"], args["State"], args.get("Reason", ""))
        if argv[0] in ("mkdir", "scancel", "squeue"):  # squeue: every group job has finished
            return 0, "", ""
        if argv[:2] == ["python3", "-c"] and argv[2] == group_jobs.WRITE_FILES:
            self.files.update(json.loads(stdin or "{}"))
            return 0, "", ""
        if argv[:3] == ["sh", "-c", group_jobs.CAT_ROUND]:
            prefix = f"{argv[4]}/r{argv[5]}-g"
            paths = sorted(p for p in self.files if p.startswith(prefix) and p.endswith("/report.json"))
            return 0, "".join(f"=== {p}\n{self.files[p]}\n" for p in paths), ""
        if argv[:3] == ["python3", "-c", group_jobs.SUBMIT]:
            argvs = json.loads(stdin or "[]")
            self.calls.extend(argvs)  # each sbatch the submitter ran on the head
            answers = [list(self._answer(a, None)) for a in argvs]
            return 0, json.dumps(answers), ""
        if argv[:3] == ["sh", "-c", liveness.PROBE_SCRIPT]:
            probed = (stdin or "").split()
            self.probed.append(probed)
            return 0, "".join(f"{n} {124 if n in self.silent else 0}\n" for n in probed), ""
        if argv[:2] == ["sh", "-c"]:
            self.files[argv[-1]] = stdin or ""
            return 0, "", ""
        if argv[0] == "cat":
            return (
                (0, self.files[argv[1]], "")
                if argv[1] in self.files
                else (1, "", f"cat: {argv[1]}: No such file")
            )
        if argv[0] == "timeout":  # the network job's deadline wrapper
            argv = argv[2:]
        if argv[0] == "sbatch":
            return self._sbatch(argv)
        raise AssertionError(f"unexpected command {argv}")

    def _update_nodes(self, hostlist: str, state: str, reason: str) -> tuple[int, str, str]:
        """``scontrol update NodeName=<host list> State=...``: each node in turn, as slurmctld does."""
        rc, errors = 0, []
        for name in expand_hostlist(hostlist):
            node = self.nodes.get(name)
            if node is None:
                return 1, "", "slurm_update error: Invalid node name specified\n"
            if state == "RESUME":
                if node["state"] != "drained":
                    rc, errors = 1, ["slurm_update error: Invalid node state specified"]
                    continue
                node.update(state="idle", reason="")
            elif name in self.refuse_drain:
                rc, errors = 1, ["slurm_update error: Access/permission denied"]
            else:
                node.update(state="drained", reason=reason)
        return rc, "", "".join(f"{e}\n" for e in errors)

    def _sbatch(self, argv: list[str]) -> tuple[int, str, str]:
        """One group test: writes each member's report at once; rank 0's carries the figure."""
        nodes = expand_hostlist(argv[argv.index("-w") + 1])
        assert any(a.startswith("--reservation=") for a in argv), "the network job must run inside the hold"
        assert "--parsable" in argv, "group jobs are submitted without waiting (the runner polls)"
        for name in nodes:
            assert self.nodes[name]["state"] != "drained", f"a job cannot start on drained {name}"
        out = re.search(r"--out (\S+)/\$SLURMD_NODENAME", argv[-1])
        assert out is not None, argv[-1]
        folder = out.group(1).strip("'")
        self.jobs.append(sorted(nodes))
        slow = bool(self.slow & set(nodes))
        link = any(set(pair) <= set(nodes) for pair in self.slow_links)
        figure = 0.002 if slow or link else 0.45 + 0.001 * (len(self.jobs) % 5)
        for rank, name in enumerate(sorted(nodes)):
            check = fake_reports.check("gloo-allreduce")
            if rank == 0:
                check["metrics"] = fake_reports.measures({"busbw": figure})
                if figure < 0.05:
                    check.update(status="fail", summary=f"busbw {figure} GB/s below 0.05 GB/s")
            report = fake_reports.report(name, [check])
            if name not in self.dead:
                self.files[f"{folder}/{name}/report.json"] = json.dumps(report)
        return 0, f"{len(self.jobs)}\n", ""
