"""What the policy would do now: per node the lemon verdict and the remediation step, and which
idle nodes the next scheduled active check takes. Pure: inputs from ``state.read_inputs``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterforge.health.remediation import Decision, decide
from clusterforge.health.scheduler import choose
from clusterforge.health.state import HealthInputs
from clusterforge.health.strikes import LemonVerdict, lemon_verdicts, mean_time_between
from clusterforge.spec.health import Health


@dataclass
class HealthPlan:
    decisions: list[Decision] = field(default_factory=list)
    lemons: dict[str, LemonVerdict] = field(default_factory=dict)
    active: list[str] = field(default_factory=list)
    mtbi_s: dict[str, float | None] = field(default_factory=dict)  # mean time between incidents
    notes: list[str] = field(default_factory=list)

    def changes(self) -> list[Decision]:
        return [d for d in self.decisions if d.action not in ("keep", "wait")]

    def to_json(self) -> dict[str, Any]:
        return {
            "decisions": [
                {
                    "node": d.node,
                    "pool": d.pool,
                    "action": d.action,
                    "why": d.why,
                    "strikes": self.lemons[d.node].strikes if d.node in self.lemons else 0,
                    "lemon": self.lemons[d.node].lemon if d.node in self.lemons else False,
                    "mtbi_s": self.mtbi_s.get(d.node),
                }
                for d in self.decisions
            ],
            "active_checks_next": self.active,
            "notes": self.notes,
        }


def health_plan(policy: Health, inputs: HealthInputs, now: float) -> HealthPlan:
    """Linear in nodes and strikes (the scheduler adds log k)."""
    lemons = lemon_verdicts(inputs.identities, inputs.strikes, policy.strikes, now)
    decisions = []
    for node in inputs.nodes:
        verdict = lemons.get(node.name)
        decisions.append(
            decide(
                node,
                policy.remediation_for(node.pool),
                bool(verdict and verdict.lemon),
                verdict.strikes if verdict else 0,
            )
        )
    by_node: dict[str, list] = {}
    for s in inputs.strikes:
        by_node.setdefault(s.node, []).append(s)
    mtbi = {n.name: mean_time_between(by_node.get(n.name, [])) for n in inputs.nodes}
    # Only nodes the policy keeps in service are checked; one it drains, re-certifies or flags is not.
    keep = {d.node for d in decisions if d.action == "keep"}
    candidates = [c for c in inputs.candidates if c.name in keep or c.checking]
    return HealthPlan(decisions, lemons, choose(candidates, policy.active, now), mtbi, list(inputs.notes))
