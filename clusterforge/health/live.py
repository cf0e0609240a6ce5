"""Slurm's view laid over the journal's (pure): who is drained, who is idle, and the passive check's drains.

The passive check drains on the node itself (Slurm's HealthCheckProgram), so the journal never hears
of it; sinfo shows it as a drained node with a ``clusterforge: <xid|ecc|...>: ...`` reason. Such a
node counts as failed now (after its last pass) for the remediation decision. It is not recorded as a
strike here: this is a read-only view, and reading it twice must not count the failure twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from clusterforge.health.scheduler import Candidate
from clusterforge.health.state import HealthInputs
from clusterforge.slurm.parse import SinfoNode

PREFIX = "clusterforge: "
# The passive check's reasons (validators/passive.py): clusterforge: <check>: <evidence>. The node's
# HealthCheckProgram (roles/slurm/templates/clusterforge-healthcheck.py.j2) drains with those, or after
# its quick certification checks with ``clusterforge: healthcheck: <check>: <evidence>`` (seen on the
# local stack's real Slurm: a lost hold drained by it before the loop's own check came back).
PASSIVE_CHECKS = ("xid", "ecc", "row-remap", "retired-pages", "throttle", "link", "healthcheck")


def passive_reason(reason: str) -> bool:
    if not reason.startswith(PREFIX):
        return False
    return reason[len(PREFIX) :].split(":", 1)[0].strip() in PASSIVE_CHECKS


def passive_check(reason: str) -> str:
    """The check a passive drain names: ``xid``, or for the health check's own ``software-versions``."""
    parts = [p.strip() for p in reason.removeprefix(PREFIX).split(":")]
    return parts[1] if parts[0] == "healthcheck" and len(parts) > 2 else parts[0]


def with_slurm(inputs: HealthInputs, sinfo: Mapping[str, SinfoNode], now: float) -> HealthInputs:
    """The inputs with Slurm's drained/idle states; nodes Slurm does not know are neither idle nor judged here."""
    nodes = []
    for node in inputs.nodes:
        sn = sinfo.get(node.name)
        if sn is None:
            nodes.append(node)
            continue
        out_of_service = sn.drained or sn.in_maintenance or not sn.responding
        failed_since_pass = node.last_fail_at is not None and (
            node.last_pass_at is None or node.last_fail_at >= node.last_pass_at
        )
        if sn.drained and passive_reason(sn.reason) and not failed_since_pass:
            node = replace(node, last_fail_at=now, last_fail_reason=sn.reason)
        nodes.append(replace(node, drained=out_of_service))
    candidates = []
    for c in inputs.candidates:
        sn = sinfo.get(c.name)
        idle = sn is not None and sn.state == "idle" and sn.serving
        candidates.append(Candidate(c.name, idle=idle, last_checked=c.last_checked, checking=c.checking))
    unknown = [n.name for n in inputs.nodes if n.name not in sinfo]
    notes = list(inputs.notes)
    if unknown:
        notes.append(
            f"{len(unknown)} node(s) not known to Slurm (not idle, judged from the journal): {unknown[0]} ..."
        )
    return HealthInputs(nodes, inputs.identities, inputs.strikes, candidates, notes)
