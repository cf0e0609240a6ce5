"""The health loop's inputs from what the journal already holds (pure: records in, inputs out).

Failures come from three places, each read once (``strikes.dedupe``): a node's last certification
verdict ``fail`` (a strike on its machine at ``certified_at``), the ``failed_gpus`` section (a
strike on each GPU of a machine replaced after failing), and the ``health_strikes`` section
(``{identity, node, at, reason, check}``, appended by ``record.record_failure`` when a certification
fails; the last verdict is not counted again when it is recorded there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from clusterforge.health.remediation import NodeHealth
from clusterforge.health.scheduler import Candidate
from clusterforge.health.strikes import Strike, dedupe
from clusterforge.journal import NodeRecord
from clusterforge.spec.models import ClusterSpec

HEALTH_STRIKES = "health_strikes"
FAILED_GPUS = "failed_gpus"  # clusterforge.rollout.identity's section
REPLACEABLE_PROVIDERS = ("aws", "local")  # `invoke replace` works there; static machines are not ours


def epoch(text: str) -> float | None:
    """ISO 8601 (the journal's now_iso) to seconds since the epoch; None when empty or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def strike_entry(item: Any) -> Strike | None:
    """One entry of the journal's ``health_strikes`` section; None without an identity or a time."""
    at = epoch(str(item.get("at") or "")) if isinstance(item, dict) else None
    if at is None or not item.get("identity"):
        return None
    return Strike(
        str(item["identity"]),
        str(item.get("node") or ""),
        at,
        str(item.get("reason") or ""),
        str(item.get("check") or ""),
    )


@dataclass
class HealthInputs:
    nodes: list[NodeHealth] = field(default_factory=list)
    identities: dict[str, list[str]] = field(default_factory=dict)  # node -> machine id and GPU ids now
    strikes: list[Strike] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _suite(spec: ClusterSpec, profile: str) -> str:
    prof = spec.certification.profiles.get(profile)
    return prof.suite if prof is not None else (profile if profile in ("quick", "standard", "full") else "")


def read_inputs(
    spec: ClusterSpec, records: Mapping[str, NodeRecord], sections: Mapping[str, Any]
) -> HealthInputs:
    """One pass over the spec's GPU and compute nodes and the journal: linear in nodes and strikes."""
    out = HealthInputs()
    replaceable = spec.provider.kind in REPLACEABLE_PROVIDERS
    strikes: list[Strike] = []
    missing: list[str] = []
    # A failure the loop recorded at the time (clusterforge.health.record) is that failure: the node's
    # last verdict must not count it a second time.
    recorded = {(str(i.get("node")), str(i.get("reason"))) for i in sections.get(HEALTH_STRIKES) or []}
    for pool in spec.node_pools:
        if pool.role == "head" or pool.role == "login":
            continue
        for name in spec.node_names(pool):
            rec = records.get(name)
            if rec is None:
                missing.append(name)
                continue
            machine = rec.provider_id or str(rec.hardware.get("provider_id") or "")
            gpus = [str(g) for g in rec.hardware.get("gpus") or []]
            out.identities[name] = [i for i in [machine, *gpus] if i]
            at = epoch(rec.certified_at)
            failed = rec.verdict == "fail"
            if failed and at is not None and machine and (name, rec.reason) not in recorded:
                strikes.append(
                    Strike(
                        machine,
                        name,
                        at,
                        rec.reason,
                        rec.reason.split(":")[1].strip() if ":" in rec.reason else "",
                    )
                )
            out.nodes.append(
                NodeHealth(
                    name=name,
                    pool=pool.name,
                    # The pipeline keeps a failed node drained with its reason; held nodes are never in service.
                    drained=failed or "certified" not in rec.done,
                    last_fail_at=at if failed else None,
                    last_fail_reason=rec.reason if failed else "",
                    last_pass_at=at if rec.verdict == "pass" else None,
                    last_pass_suite=_suite(spec, rec.profile) if rec.verdict == "pass" else "",
                    certifying=bool(rec.certifying),
                    replaceable=replaceable,
                )
            )
            out.candidates.append(
                Candidate(name, idle=rec.verdict == "pass" and not rec.certifying, last_checked=at)
            )
    if missing:
        shown = ", ".join(missing[:3]) + (f", ... {missing[-1]}" if len(missing) > 3 else "")
        out.notes.append(
            f"{len(missing)} node(s) not in the journal (never brought up), nothing to decide: {shown}"
        )
    for gpu, info in (sections.get(FAILED_GPUS) or {}).items():
        at = epoch(str(info.get("at") or ""))
        if at is not None:
            strikes.append(Strike(gpu, str(info.get("node") or ""), at, str(info.get("reason") or "")))
    for item in sections.get(HEALTH_STRIKES) or []:
        strike = strike_entry(item)
        if strike is None:
            out.notes.append(f"{HEALTH_STRIKES}: entry without identity or time ignored: {item}")
            continue
        strikes.append(strike)
    out.strikes = dedupe(strikes)
    # A strike of the loop's own record on a node whose last verdict is a pass is newer history the
    # journal's verdict does not show: it makes the node failed again from that time.
    latest: dict[str, Strike] = {}
    for s in out.strikes:
        if s.node and (s.node not in latest or s.at > latest[s.node].at):
            latest[s.node] = s
    out.nodes = [_with_latest(n, latest.get(n.name), out.identities.get(n.name, [])) for n in out.nodes]
    return out


def _with_latest(node: NodeHealth, strike: Strike | None, identities: list[str]) -> NodeHealth:
    if strike is None or strike.identity not in identities:
        return node  # a strike on a machine the node no longer has is that machine's history
    if node.last_fail_at is not None and node.last_fail_at >= strike.at:
        return node
    return NodeHealth(
        name=node.name,
        pool=node.pool,
        drained=node.drained,
        last_fail_at=strike.at,
        last_fail_reason=strike.reason,
        last_pass_at=node.last_pass_at,
        last_pass_suite=node.last_pass_suite,
        certifying=node.certifying,
        replaceable=node.replaceable,
    )
