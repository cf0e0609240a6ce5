"""Slurm admission through the head node: hold, release, fail, each a few head commands for any node count.

The hold is a maintenance reservation, not DRAIN. A job cannot start on a DRAIN node even
inside a reservation (tried on Slurm 22.05: it stays ``PENDING ReqNodeNotAvail``; see
``tests/data/slurm/README.md``), yet the multi-node network check must run as a Slurm job on the
held nodes. So:

- hold: the nodes join reservation ``clusterforge_cert`` (``Flags=MAINT,IGNORE_JOBS``,
  ``Users=root``): no user job can land on them, but root's certification jobs can. Those drained
  by clusterforge (``clusterforge: certifying`` from the Slurm role at registration, or an
  earlier failure) are resumed *inside* the reservation.
- release (pass): the nodes leave the reservation (deleted when empty) -> ``idle``.
- fail: DRAIN with ``clusterforge: <check-id>: <one line>``, then they leave the reservation.

Batched: every change names its nodes as one Slurm host list (``gpu-[001-512]``: scontrol takes
host lists wherever it takes a node name), and one ``sinfo`` read serves a whole step, so a step
costs a constant number of head commands whatever the node count. Drains with different reasons
go to the head as one script fed on stdin (one ``scontrol update`` per distinct reason): never
one command per node from the workstation, never a giant argument (ssh joins argv into one shell
line, and Linux refuses one argument over 128 KiB).

Only names Slurm knows go into a node list: slurmctld's update_node stops at the first unknown
name of a list (Slurm 22.05 src/slurmctld/node_mgr.c: ``ESLURM_INVALID_NODE_NAME``, ``break``), so
one stray name would leave the rest unchanged.

A command that fails is asked about with ``scontrol ping`` (it reads slurm.conf, no controller
needed): when no controller answers, the failure is the controller's, not the nodes', and
``ControllerError`` says so (callers wait for it or stop; they never fail a node for it).

A DRAIN whose reason does not start with ``clusterforge:`` was set by a person: it is left alone.
Every command goes through an injected runner ``(argv, stdin=None) -> (rc, stdout, stderr)`` that
executes on the head node, so this module is tested without a cluster.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from clusterforge.slurm.parse import (
    SINFO_FORMAT,
    Reservation,
    SinfoNode,
    compress_hostlist,
    parse_reservations,
    parse_sinfo,
)
from clusterforge.waiting import wait_until

Runner = Callable[..., tuple[int, str, str]]

RESERVATION = "clusterforge_cert"
REASON_PREFIX = "clusterforge:"
HOLD_REASON = "clusterforge: certifying"
MAX_REASON = 200  # keep sinfo rows readable; the full story is in the report
PING = ["scontrol", "ping"]

# stdin: one "<host list>\t<reason>" line per distinct reason. One output line per input line:
# "<scontrol exit status>\t<host list>\t<its message, on one line>".
DRAIN_SCRIPT = r"""
while IFS='	' read -r nodes reason; do
  [ -n "$nodes" ] || continue
  msg=$(scontrol update NodeName="$nodes" State=DRAIN Reason="$reason" 2>&1)
  printf '%s\t%s\t%s\n' "$?" "$nodes" "$(printf '%s' "$msg" | tr '\n\t' '  ')"
done
""".strip()


class AdmissionError(Exception):
    pass


class ControllerError(AdmissionError):
    """No Slurm controller answers (or the head node cannot be reached): not a fault of any node."""


def failure_reason(check_id: str, line: str) -> str:
    """``clusterforge: <check-id>: <one line>``, flattened and bounded."""
    one = " ".join(line.split())
    reason = f"{REASON_PREFIX} {check_id}: {one}" if one else f"{REASON_PREFIX} {check_id}"
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1] + "…"


@dataclass
class DrainOutcome:
    """What a batch of drains did: the reason each node got, and the nodes whose drain did not land
    (the controller refused the update, or the node is not known to Slurm) with why."""

    drained: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


class Admission:
    def __init__(self, run: Runner, reservation: str = RESERVATION):
        self._run = run
        self.reservation = reservation
        self._lock = threading.Lock()

    def _call(self, argv: list[str], what: str, stdin: str | None = None) -> str:
        def attempt() -> tuple[int, str, str]:
            return self._run(argv, stdin=stdin) if stdin is not None else self._run(argv)

        rc, out, err = attempt()
        if rc == 0:
            return out
        down = self.controller_problem()
        if down:
            raise ControllerError(f"{what}: {down}")
        # The controller answers now: it may have come back since the command failed. Once more;
        # a second failure is the command's own (a bad node name, a refused change).
        rc, out, err = attempt()
        if rc == 0:
            return out
        shown = " ".join(argv) if len(" ".join(argv)) <= 200 else " ".join(argv)[:200] + "…"
        raise AdmissionError(f"{what}: `{shown}` exited {rc}: {_last_line(err or out)}")

    def controller_problem(self) -> str:
        """ "" when a Slurm controller answers ``scontrol ping``; else what is wrong, naming it."""
        rc, out, err = self._run(PING)
        if rc == 0:
            return ""
        says = " ".join(line.strip() for line in out.splitlines() if line.startswith("Slurmctld"))
        if says:
            return f"the Slurm controller is not answering ({says})"
        return f"cannot ask the Slurm controller from the head node (`scontrol ping` exited {rc}: {_last_line(err or out)})"

    def check_controller(self) -> None:
        """Raise ControllerError when no controller answers."""
        down = self.controller_problem()
        if down:
            raise ControllerError(down)

    # -- reading -----------------------------------------------------------------------------

    def nodes(self) -> dict[str, SinfoNode]:
        return parse_sinfo(self._call(["sinfo", "-h", "-N", "-o", SINFO_FORMAT], "reading node states"))

    def reservations(self) -> dict[str, Reservation]:
        return parse_reservations(self._call(["scontrol", "show", "reservation"], "reading reservations"))

    def held(self) -> set[str]:
        res = self.reservations().get(self.reservation)
        return set(res.nodes) if res else set()

    def wait_registered(
        self,
        names: Iterable[str],
        timeout_s: float = 120.0,
        poll_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[str]:
        """Wait until every node is known to Slurm and responding (one sinfo per poll); returns the
        ones that never were. A controller that does not answer raises ControllerError: no node
        is "never registered" because the controller was away."""
        want = set(names)

        def missing() -> list[str]:
            try:
                known = self.nodes()
            except ControllerError:
                raise  # no controller answers: the caller waits for it, never a node's failure
            except AdmissionError:
                known = {}  # a failed read is read again until the deadline
            return sorted(n for n in want if n not in known or not known[n].responding)

        return wait_until(missing, lambda left: not left, timeout_s=timeout_s, poll_s=poll_s, sleep=sleep)

    # -- changing ----------------------------------------------------------------------------

    def _set_reserved(self, nodes: set[str], current: Reservation | None) -> None:
        if not nodes:
            if current:
                self._call(["scontrol", "delete", f"ReservationName={self.reservation}"], "ending the hold")
            return
        node_list = compress_hostlist(nodes)
        if current:
            argv = ["scontrol", "update", f"ReservationName={self.reservation}", f"Nodes={node_list}"]
        else:
            argv = [
                "scontrol", "create", "reservation", f"ReservationName={self.reservation}",
                f"Nodes={node_list}", "Flags=MAINT,IGNORE_JOBS", "Users=root",
                "StartTime=now", "Duration=UNLIMITED",
            ]  # fmt: skip
        self._call(argv, "updating the certification hold")

    def _resume(self, names: Iterable[str], states: Mapping[str, SinfoNode], what: str) -> None:
        """RESUME, in one command, the nodes that clusterforge drained (never a person's drain)."""
        ours = [
            n
            for n in names
            if (s := states.get(n)) is not None and s.drained and s.reason.startswith(REASON_PREFIX)
        ]
        if ours:
            self._call(["scontrol", "update", f"NodeName={compress_hostlist(ours)}", "State=RESUME"], what)

    def hold(self, names: Iterable[str]) -> None:
        """Put nodes in the certification reservation; resume those clusterforge itself drained."""
        names = set(names)
        if not names:
            return
        with self._lock:
            states = self.nodes()
            unknown = sorted(n for n in names if n not in states)
            if unknown:
                raise AdmissionError(
                    f"{compress_hostlist(unknown)}: not known to Slurm (is slurmd running and in slurm.conf?)"
                )
            current = self.reservations().get(self.reservation)
            self._set_reserved((set(current.nodes) if current else set()) | names, current)
            self._resume(sorted(names), states, "resuming in the hold")

    def release(self, names: str | Iterable[str]) -> None:
        """Certified: leave the hold and take user work (one sinfo, at most three updates)."""
        names = {names} if isinstance(names, str) else set(names)
        if not names:
            return
        with self._lock:
            self._resume(sorted(names), self.nodes(), "resuming")
            current = self.reservations().get(self.reservation)
            if current is not None and names & set(current.nodes):
                self._set_reserved(set(current.nodes) - names, current)

    def drain(self, names: str | Iterable[str], reason: str) -> None:
        """DRAIN with ``reason`` (a rollout's ``clusterforge: upgrading``): running jobs finish,
        no new job starts. Draining an already drained node only replaces its reason."""
        names = {names} if isinstance(names, str) else set(names)
        if not names:
            return
        with self._lock:
            self._call(
                [
                    "scontrol",
                    "update",
                    f"NodeName={compress_hostlist(names)}",
                    "State=DRAIN",
                    f"Reason={reason}",
                ],
                f"{compress_hostlist(names)}: draining",
            )

    def wait_drained(
        self,
        names: Iterable[str],
        timeout_s: float,
        poll_s: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[str]:
        """Wait until no job runs on the nodes: sinfo says ``drained`` (``draining`` while jobs
        run, sinfo(1) NODE STATE CODES). Returns the nodes still busy at the deadline."""
        want = set(names)

        def busy() -> list[str]:
            states = self.nodes()
            return sorted(n for n in want if n not in states or states[n].state != "drained")

        return wait_until(busy, lambda left: not left, timeout_s=timeout_s, poll_s=poll_s, sleep=sleep)

    def fail(self, name: str, check_id: str, line: str) -> str:
        """Failed: DRAIN with the failing check as the reason, then leave the hold. Returns the reason;
        raises AdmissionError when the drain did not land."""
        reason = failure_reason(check_id, line)
        outcome = self.fail_many({name: reason})
        if name in outcome.refused:
            raise AdmissionError(outcome.refused[name])
        return reason

    def fail_many(self, reasons: Mapping[str, str]) -> DrainOutcome:
        """DRAIN every node with its reason (``failure_reason`` lines) and take them out of the hold:
        one sinfo, one script for the drains (one scontrol per distinct reason), one reservation
        update. Nodes Slurm does not know, or whose update the controller refused, are in
        ``refused`` with why; ControllerError when no controller answers."""
        outcome = DrainOutcome()
        if not reasons:
            return outcome
        with self._lock:
            states = self.nodes()
            by_reason: dict[str, list[str]] = defaultdict(list)
            for name, reason in sorted(reasons.items()):
                if name in states:
                    by_reason[reason].append(name)
                else:
                    outcome.refused[name] = (
                        "not known to the Slurm controller, so it cannot be drained (is it in slurm.conf?)"
                    )
            lines = {compress_hostlist(names): (reason, names) for reason, names in by_reason.items()}
            if lines:
                script = "".join(f"{hl}\t{reason}\n" for hl, (reason, _) in lines.items())
                rc, out, err = self._run(["sh", "-c", DRAIN_SCRIPT], stdin=script)
                answered = {}
                for row in out.splitlines():
                    code, _, rest = row.partition("\t")
                    hl, _, message = rest.partition("\t")
                    answered[hl] = (code.strip(), message.strip())
                after: dict[str, SinfoNode] | None = None
                for hl, (reason, names) in lines.items():
                    code, message = answered.get(
                        hl, ("", _last_line(err or out) or f"the drain script exited {rc}")
                    )
                    if code == "0":
                        outcome.drained.update(dict.fromkeys(names, reason))
                        continue
                    down = self.controller_problem()
                    if down:
                        raise ControllerError(f"draining {hl}: {down}")
                    # An update of several nodes goes on past a node it refuses: ask which landed.
                    after = after if after is not None else self.nodes()
                    why = (
                        f"the Slurm controller refused `scontrol update NodeName={hl} State=DRAIN`: {message}"
                    )
                    for name in names:
                        now = after.get(name)
                        if now is not None and now.drained and now.reason.startswith(reason[:60]):
                            outcome.drained[name] = reason
                        else:
                            outcome.refused[name] = why
            current = self.reservations().get(self.reservation)
            if current is not None and set(reasons) & set(current.nodes):
                self._set_reserved(set(current.nodes) - set(outcome.drained), current)
        return outcome
