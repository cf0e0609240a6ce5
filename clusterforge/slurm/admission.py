"""Slurm admission through the head node: hold, release, fail.

The hold is a maintenance reservation, not DRAIN. A job cannot start on a DRAIN node even
inside a reservation (tried on Slurm 22.05: it stays ``PENDING ReqNodeNotAvail``; see
``tests/data/slurm/README.md``), yet the multi-node network check must run as a Slurm job on the
held nodes. So:

- hold: the node joins reservation ``clusterforge_cert`` (``Flags=MAINT,IGNORE_JOBS``,
  ``Users=root``): no user job can land on it, but root's certification jobs can. If it was
  drained by clusterforge (``clusterforge: certifying`` from the Slurm role at registration, or
  an earlier failure), it is resumed *inside* the reservation.
- release (pass): the node leaves the reservation (deleted when empty) -> ``idle``.
- fail: DRAIN with ``clusterforge: <check-id>: <one line>``, then it leaves the reservation.

A DRAIN whose reason does not start with ``clusterforge:`` was set by a person: it is left alone.
Every command goes through an injected runner ``(argv) -> (rc, stdout, stderr)`` that executes on
the head node, so this module is tested without a cluster.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from clusterforge.slurm.parse import (
    SINFO_FORMAT,
    Reservation,
    SinfoNode,
    parse_reservations,
    parse_sinfo,
)
from clusterforge.waiting import wait_until

Runner = Callable[[list[str]], tuple[int, str, str]]

RESERVATION = "clusterforge_cert"
REASON_PREFIX = "clusterforge:"
HOLD_REASON = "clusterforge: certifying"
MAX_REASON = 200  # keep sinfo rows readable; the full story is in the report


class AdmissionError(Exception):
    pass


def failure_reason(check_id: str, line: str) -> str:
    """``clusterforge: <check-id>: <one line>``, flattened and bounded."""
    one = " ".join(line.split())
    reason = f"{REASON_PREFIX} {check_id}: {one}" if one else f"{REASON_PREFIX} {check_id}"
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1] + "…"


class Admission:
    def __init__(self, run: Runner, reservation: str = RESERVATION):
        self._run = run
        self.reservation = reservation
        self._lock = threading.Lock()

    def _call(self, argv: list[str], what: str) -> str:
        rc, out, err = self._run(argv)
        if rc != 0:
            detail = (err or out).strip().splitlines()
            raise AdmissionError(f"{what}: `{' '.join(argv)}` exited {rc}: {detail[-1] if detail else ''}")
        return out

    # -- reading -----------------------------------------------------------------------------

    def nodes(self) -> dict[str, SinfoNode]:
        return parse_sinfo(self._call(["sinfo", "-h", "-N", "-o", SINFO_FORMAT], "reading node states"))

    def reservations(self) -> dict[str, Reservation]:
        return parse_reservations(self._call(["scontrol", "show", "reservation"], "reading reservations"))

    def held(self) -> set[str]:
        res = self.reservations().get(self.reservation)
        return set(res.nodes) if res else set()

    def wait_registered(
        self, names: Iterable[str], timeout_s: float = 120.0, poll_s: float = 2.0
    ) -> list[str]:
        """Wait until every node is known to Slurm and responding; returns the ones that never were."""
        want = set(names)

        def missing() -> list[str]:
            try:
                known = self.nodes()
            except AdmissionError:
                known = {}
            return sorted(n for n in want if n not in known or not known[n].responding)

        return wait_until(missing, lambda left: not left, timeout_s=timeout_s, poll_s=poll_s)

    # -- changing ----------------------------------------------------------------------------

    def _set_reserved(self, nodes: set[str]) -> None:
        current = self.reservations().get(self.reservation)
        if not nodes:
            if current:
                self._call(["scontrol", "delete", f"ReservationName={self.reservation}"], "ending the hold")
            return
        node_list = ",".join(sorted(nodes))
        if current:
            argv = ["scontrol", "update", f"ReservationName={self.reservation}", f"Nodes={node_list}"]
        else:
            argv = [
                "scontrol", "create", "reservation", f"ReservationName={self.reservation}",
                f"Nodes={node_list}", "Flags=MAINT,IGNORE_JOBS", "Users=root",
                "StartTime=now", "Duration=UNLIMITED",
            ]  # fmt: skip
        self._call(argv, "updating the certification hold")

    def hold(self, names: Iterable[str]) -> None:
        """Put nodes in the certification reservation; resume those clusterforge itself drained."""
        names = set(names)
        with self._lock:
            self._set_reserved(self.held() | names)
            states = self.nodes()
            for name in sorted(names):
                node = states.get(name)
                if node is None:
                    raise AdmissionError(f"{name}: not known to Slurm (is slurmd running and in slurm.conf?)")
                if node.drained and node.reason.startswith(REASON_PREFIX):
                    self._call(
                        ["scontrol", "update", f"NodeName={name}", "State=RESUME"],
                        f"{name}: resuming in hold",
                    )

    def release(self, name: str) -> None:
        """Certified: leave the hold and take user work."""
        with self._lock:
            node = self.nodes().get(name)
            if node is not None and node.drained and node.reason.startswith(REASON_PREFIX):
                self._call(["scontrol", "update", f"NodeName={name}", "State=RESUME"], f"{name}: resuming")
            self._set_reserved(self.held() - {name})

    def drain(self, name: str, reason: str) -> None:
        """DRAIN with ``reason`` (a rollout's ``clusterforge: upgrading``): running jobs finish,
        no new job starts. Draining an already drained node only replaces its reason."""
        with self._lock:
            self._call(
                ["scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"],
                f"{name}: draining",
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
        """Failed: DRAIN with the failing check as the reason, then leave the hold. Returns the reason."""
        reason = failure_reason(check_id, line)
        with self._lock:
            self._call(
                ["scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason={reason}"],
                f"{name}: draining",
            )
            self._set_reserved(self.held() - {name})
        return reason
