"""What the remediation policy does with one node now.

The order is fixed (issue 28): a failed check drains the node (running jobs finish), it is
re-certified with the policy's suite, and it returns to service only on a pass of that suite
newer than its last failure. A lemon is never returned: it is replaced where the policy says
``on_lemon: replace`` and the provider can, otherwise flagged for RMA and kept drained. Nothing is
replaced unless the policy says so. Each decision is a function of the node's recorded state,
so running it again after a crash gives the same answer (idempotent, resumable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from clusterforge.spec.health import Remediation

Action = Literal["keep", "drain", "recertify", "return", "replace", "flag-rma", "wait"]
SUITE_RANK = {"quick": 0, "standard": 1, "full": 2}


@dataclass(frozen=True)
class NodeHealth:
    """One node as the journal (and, when asked, Slurm) knows it."""

    name: str
    pool: str
    drained: bool  # out of service now (drained, held or failed)
    last_fail_at: float | None = None
    last_fail_reason: str = ""
    last_pass_at: float | None = None
    last_pass_suite: str = ""  # quick | standard | full ("" unknown)
    certifying: bool = False  # a certification is under way (or was cut short)
    replaceable: bool = True  # the provider can replace this machine (aws, local)


@dataclass(frozen=True)
class Decision:
    node: str
    pool: str
    action: Action
    why: str


def _passed_since_failure(node: NodeHealth, suite: str) -> bool:
    if node.last_pass_at is None:
        return False
    if node.last_fail_at is not None and node.last_pass_at <= node.last_fail_at:
        return False
    return SUITE_RANK.get(node.last_pass_suite, -1) >= SUITE_RANK[suite]


def decide(node: NodeHealth, policy: Remediation, lemon: bool, strikes: int) -> Decision:
    """The one next step for ``node`` under ``policy``."""

    def say(action: Action, why: str) -> Decision:
        return Decision(node.name, node.pool, action, why)

    failed = node.last_fail_at is not None and (
        node.last_pass_at is None or node.last_fail_at >= node.last_pass_at
    )
    if lemon:
        if policy.on_lemon == "replace" and node.replaceable:
            return say("replace", f"lemon ({strikes} strikes in the window): policy on_lemon: replace")
        why = "policy on_lemon: flag" if policy.on_lemon == "flag" else "the provider cannot replace it"
        return say(
            "flag-rma", f"lemon ({strikes} strikes in the window): kept drained, flagged for RMA ({why})"
        )
    if node.certifying:
        return say("wait", "a certification is under way")
    if node.drained and node.last_fail_at is None and node.last_pass_at is None:
        return say("wait", "not certified yet: the pipeline holds it")
    if failed and not node.drained:
        return say("drain", f"failed: {node.last_fail_reason or 'a check failed'}; drain, let jobs finish")
    if failed:
        return say(
            "recertify",
            f"drained after: {node.last_fail_reason or 'a failure'}; re-certify ({policy.recertify_suite})",
        )
    if node.drained and node.last_fail_at is not None:
        if _passed_since_failure(node, policy.recertify_suite):
            return say("return", f"passed {node.last_pass_suite} after its last failure: return to service")
        return say(
            "recertify",
            f"passed {node.last_pass_suite or 'an unknown suite'} only; return needs a {policy.recertify_suite} pass",
        )
    return say(
        "keep", "in service" if not node.drained else "drained by someone else: not the policy's to lift"
    )
