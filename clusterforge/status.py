"""`status`: a row per node from the three places state lives (provider, journal, Slurm)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from rich.markup import escape
from rich.table import Table

from clusterforge.certify.admission import Admission, AdmissionError
from clusterforge.certify.remote import Runner, node_runner
from clusterforge.certify.slurm_parse import SinfoNode
from clusterforge.journal import Journal, stack_dir
from clusterforge.providers import Node, Provider
from clusterforge.spec.models import ClusterSpec


@dataclass(frozen=True)
class NodeStatus:
    node: str
    role: str
    provider_state: str  # running / exited / absent ...
    configured: bool
    certification: str  # certified | failed | none
    certified_at: str
    profile: str
    slurm_state: str  # e.g. idle, drained, maint, unknown; "" for nodes Slurm does not schedule
    slurm_reason: str
    report: str
    detail: str  # the journal's reason for a failure

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def slurm_states(
    provider_nodes: dict[str, Node], heads: list[str], runner: Callable[..., Runner] = node_runner
) -> tuple[dict[str, SinfoNode], str]:
    """sinfo through the first running head node; ({}, reason) when it cannot be asked."""
    for name in heads:
        node = provider_nodes.get(name)
        if node is not None and node.state == "running":
            try:
                return Admission(runner(node, timeout_s=30)).nodes(), ""
            except AdmissionError as exc:
                return {}, str(exc)
    return {}, "no running head node"


def collect(
    spec: ClusterSpec, provider: Provider, runner: Callable[..., Runner] = node_runner
) -> list[NodeStatus]:
    journal = Journal(spec.stack, stack_dir(spec.stack).parent)
    planned = provider.plan(spec)
    live = {n.name: n for n in provider.nodes(spec)}
    slurm, slurm_error = slurm_states(live, [p.name for p in planned if p.role == "head"], runner)
    rows = []
    for p in planned:
        node = live.get(p.name)
        rec = journal.record(p.name)
        if rec.verdict == "pass" and journal.is_done(p.name, "certified"):
            cert = "certified"
        elif rec.verdict == "fail":
            cert = "failed"
        else:
            cert = "none"
        sn = slurm.get(p.name)
        if p.role != "gpu":
            state, reason = "", ""
        elif sn is not None:
            state, reason = sn.display, sn.reason
        else:
            state, reason = "unknown", slurm_error or "not known to Slurm"
        rows.append(
            NodeStatus(
                node=p.name,
                role=p.role,
                provider_state=node.state if node else "absent",
                configured=journal.is_done(p.name, "configured"),
                certification=cert,
                certified_at=rec.certified_at,
                profile=rec.profile,
                slurm_state=state,
                slurm_reason=reason,
                report=rec.report,
                detail=rec.reason,
            )
        )
    return rows


def table(spec: ClusterSpec, rows: list[NodeStatus]) -> Table:
    t = Table(title=f"stack {spec.stack}")
    for col in ("node", "role", "provider", "configured", "certification", "certified at", "slurm", "reason"):
        t.add_column(col)
    for r in rows:
        colour = {"certified": "green", "failed": "red"}.get(r.certification, "dim")
        t.add_row(
            r.node, r.role, r.provider_state, "yes" if r.configured else "no",
            f"[{colour}]{r.certification}[/{colour}]", r.certified_at, r.slurm_state, escape(r.slurm_reason or r.detail),
        )  # fmt: skip
    return t
