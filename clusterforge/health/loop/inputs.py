"""The policy's inputs from the loop's own journal and Slurm's view now (pure).

The loop keeps one ``NodeRecord`` per node in its journal on shared storage, in the workstation's
meaning: ``verdict``/``certified_at``/``reason`` of its last check (``profile`` holds the suite it ran),
``certifying`` = ``<kind>:<job id>`` while a job of the loop runs, ``failed_stage`` ``health-active`` or
``health-recertify`` for a failure of the loop's own checks. Strikes are the journal section
``health_strikes`` (the format ``health.record`` writes everywhere).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterforge.health.live import with_slurm
from clusterforge.health.loop.config import LoopConfig
from clusterforge.health.remediation import NodeHealth
from clusterforge.health.scheduler import Candidate
from clusterforge.health.state import HEALTH_STRIKES, HealthInputs, epoch, strike_entry
from clusterforge.health.strikes import Strike, dedupe
from clusterforge.journal import NodeRecord
from clusterforge.slurm.parse import SinfoNode


def strikes_of(sections: Mapping[str, Any]) -> list[Strike]:
    entries = (strike_entry(item) for item in sections.get(HEALTH_STRIKES) or [])
    return dedupe([s for s in entries if s is not None])


def loop_inputs(
    config: LoopConfig,
    records: Mapping[str, NodeRecord],
    sections: Mapping[str, Any],
    sinfo: Mapping[str, SinfoNode],
    now: float,
) -> HealthInputs:
    """Linear in nodes and strikes. A node Slurm does not list counts as out of service."""
    out = HealthInputs()
    out.strikes = strikes_of(sections)
    # A pass overwrites the record's failure: the node's last strike keeps when it last failed, so that
    # the policy still sees a drained node that failed and then passed (-> return), not someone's drain.
    latest: dict[str, Strike] = {}
    for s in out.strikes:
        if s.at > (latest[s.identity].at if s.identity in latest else float("-inf")):
            latest[s.identity] = s
    for name, node in config.nodes.items():
        rec = records.get(name) or NodeRecord()
        out.identities[name] = list(node.identities)
        at = epoch(rec.certified_at)
        failed = rec.verdict == "fail"
        fail_at, fail_reason = (at, rec.reason) if failed else (None, "")
        for identity in node.identities:
            held = latest.get(identity)
            if held is not None and held.node == name and (fail_at is None or held.at > fail_at):
                fail_at, fail_reason = held.at, held.reason
        out.nodes.append(
            NodeHealth(
                name=name,
                pool=node.pool,
                drained=True,  # until Slurm says otherwise (with_slurm)
                last_fail_at=fail_at,
                last_fail_reason=fail_reason,
                last_pass_at=at if rec.verdict == "pass" else None,
                last_pass_suite=rec.profile if rec.verdict == "pass" else "",
                certifying=bool(rec.certifying),
                replaceable=config.replaceable,
            )
        )
        kind = rec.certifying.partition(":")[0]
        out.candidates.append(Candidate(name, idle=False, last_checked=at, checking=kind == "active"))
    return with_slurm(out, sinfo, now)
