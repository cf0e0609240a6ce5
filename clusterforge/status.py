"""`status`: every node from the three places state lives (provider, journal, Slurm).

People get a summary by state (per pool: provider states, configured, certification, Slurm
states) and the nodes that need a look, once the stack is larger than ``DETAIL_LIMIT`` nodes;
``--wide`` and ``--json`` give every node's row whatever the size.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from rich import box
from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from clusterforge.health.head_state import with_head_strikes
from clusterforge.health.history import node_history
from clusterforge.journal import Journal, stack_dir
from clusterforge.lock import ago
from clusterforge.node.remote import Runner, node_runner
from clusterforge.node.reports import report_run_id
from clusterforge.providers import Node, Provider
from clusterforge.slurm.admission import Admission, AdmissionError
from clusterforge.slurm.parse import SinfoNode, compress_hostlist
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
    # Pinned versions where the compute nodes differ (a rollout under way), e.g.
    # "nvidia_driver_version=535.309.01"; "" while every node runs the same set.
    versions: str = ""
    # Warnings about the machine, e.g. a GPU seen before on a machine that failed.
    flags: str = ""
    # Incidents (clusterforge.health.history), e.g. "2/3 in 7d, last 5 h ago, MTBI 1.2 d"; "" without any.
    strikes: str = ""
    pool: str = ""

    @property
    def trouble(self) -> bool:
        """Needs a look: not running, failed, or out of service in Slurm for a reason."""
        slurm = self.slurm_state.rstrip("*~#!%$@^-")
        return (
            self.provider_state != "running"
            or self.certification == "failed"
            or bool(self.flags)
            or (self.role == "gpu" and (slurm not in ("idle", "allocated", "mixed", "completing", "maint", "planned")
                                        or self.slurm_state.endswith("*")))
        )  # fmt: skip

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
    heads = [p.name for p in planned if p.role == "head"]
    slurm, slurm_error = slurm_states(live, heads, runner)
    rows = []
    mixed = mixed_versions(journal, [p.name for p in planned if p.role == "gpu"])
    sections = with_head_strikes(spec, journal.sections, live, heads, runner)
    history = node_history(spec, journal.nodes, sections, datetime.now(UTC).timestamp())
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
                report=_this_runs_report(rec.report, rec.run_id),
                detail=rec.reason,
                versions=mixed.get(p.name, ""),
                flags="; ".join(_gpu_flags(journal, p.name, node)),
                pool=p.pool,
                strikes=history.get(p.name, ""),
            )
        )
    return rows


def node_versions(journal: Journal, name: str) -> dict[str, str]:
    """The version set a node was certified with (upgrade/replace), else what it last converged."""
    rec = journal.record(name)
    return dict(rec.versions or (rec.applied.get("inputs") or {}).get("pinned") or {})


def mixed_versions(journal: Journal, names: list[str]) -> dict[str, str]:
    """Per node, its values of the pinned versions on which the nodes differ (empty when none do)."""
    sets = {n: node_versions(journal, n) for n in names}
    known = [v for v in sets.values() if v]
    keys = sorted({k for v in known for k in v if len({s.get(k) for s in known}) > 1})
    return {n: ", ".join(f"{k}={v.get(k, '?')}" for k in keys) for n, v in sets.items() if keys and v}


def _gpu_flags(journal: Journal, name: str, node: Node | None) -> list[str]:
    from clusterforge.rollout.identity import report_gpus, seen_failed

    rec = journal.record(name)
    gpus = list(rec.hardware.get("gpus") or report_gpus(rec.report))
    return seen_failed(journal, name, gpus, node.provider_id if node else rec.provider_id)


def _this_runs_report(path: str, run_id: str) -> str:
    """The journal's report path, only while that file is still the one its run wrote."""
    if not path:
        return ""
    if run_id and report_run_id(Path(path)) != run_id:
        return f"no report in this run ({run_id})"
    return path


# (header, wide header, value) per column; narrow headers fit 80 columns with a short reason.
_CERT = {"certified": "[green]pass[/green]", "failed": "[red]FAIL[/red]", "none": "-"}


def _columns(row: NodeStatus, wide: bool, now: datetime | None) -> list[tuple[str, str]]:
    when = row.certified_at if wide else (ago(row.certified_at, now) if row.certified_at else "")
    cert = row.certification if wide else _CERT.get(row.certification, row.certification)
    if wide:
        colour = {"certified": "green", "failed": "red"}.get(row.certification, "dim")
        cert = f"[{colour}]{row.certification}[/{colour}]"
    return [
        ("node", row.node),
        ("role", row.role),
        ("provider" if wide else "state", row.provider_state),
        ("configured" if wide else "cfg", "yes" if row.configured else "no"),
        ("certification" if wide else "cert", cert),
        ("certified at" if wide else "when", when),
        ("profile", row.profile if wide else ""),
        ("slurm", row.slurm_state),
        ("versions", escape(row.versions)),
        ("strikes", escape(row.strikes)),
        ("reason", escape("; ".join(x for x in (row.slurm_reason or row.detail, row.flags) if x))),
        ("report", escape(row.report) if wide else ""),
    ]


def table(
    spec: ClusterSpec, rows: list[NodeStatus], wide: bool = False, now: datetime | None = None
) -> Table:
    """A row per node. Narrow (default, fits 80 columns): short headers, relative times, columns
    empty for every node left out, the reason wrapped in the width left. ``wide``: every column,
    ISO times, the report path."""
    cells = [_columns(r, wide, now) for r in rows]
    headers = [h for h, _ in cells[0]] if cells else [h for h, _ in _columns(_EMPTY, wide, now)]
    keep = [
        i for i, h in enumerate(headers) if wide or h in ("node", "reason") or any(c[i][1] for c in cells)
    ]
    t = Table(title=f"stack {spec.stack}", box=box.SIMPLE_HEAD, pad_edge=False)
    for i in keep:
        # Only the free text wraps (the reason is the evidence: wrapped, never cut).
        free = headers[i] in ("reason", "report")
        widest = max([len(headers[i])] + [Text.from_markup(c[i][1]).cell_len for c in cells])
        t.add_column(
            headers[i],
            no_wrap=not free,
            overflow="fold" if headers[i] == "report" else "ellipsis",
            min_width=None if free else min(widest, 30),
        )
    for row_cells in cells:
        t.add_row(*(row_cells[i][1] for i in keep))
    return t


_EMPTY = NodeStatus("", "", "", False, "none", "", "", "", "", "", "")


DETAIL_LIMIT = 32  # up to this many nodes, `status` shows a row per node
SHOWN = 10  # nodes that need a look, listed by name in the summary


def _counts(values: list[str]) -> str:
    return ", ".join(f"{v or '-'} {n:,}" for v, n in Counter(values).most_common())


def summary(spec: ClusterSpec, rows: list[NodeStatus]) -> Group:
    """Per pool: how many nodes in each provider state, configured, certification verdict and
    Slurm state; then the nodes that need a look (the first ``SHOWN``, the rest counted)."""
    t = Table(title=f"stack {spec.stack}: {len(rows):,} nodes", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("pool", "nodes", "provider", "configured", "certification", "slurm"):
        t.add_column(col, overflow="fold")
    pools: dict[str, list[NodeStatus]] = {}
    for r in rows:
        pools.setdefault(r.pool or r.role, []).append(r)
    for pool, members in pools.items():
        gpu = [r for r in members if r.role == "gpu"]
        t.add_row(
            pool,
            f"{len(members):,}",
            _counts([r.provider_state for r in members]),
            f"{sum(r.configured for r in members):,}",
            _counts([r.certification for r in gpu]) if gpu else "",
            _counts([r.slurm_state for r in gpu]) if gpu else "",
        )
    trouble = [r for r in rows if r.trouble]
    lines: list[Text] = []
    for r in trouble[:SHOWN]:
        why = "; ".join(x for x in (r.slurm_reason or r.detail, r.flags) if x)
        state = ", ".join(x for x in (r.provider_state, r.certification, r.slurm_state) if x)
        lines.append(Text(f"{r.node} ({state}): {why}"[:300], style="red"))
    if len(trouble) > SHOWN:
        rest = compress_hostlist(r.node for r in trouble[SHOWN:])
        lines.append(
            Text(
                f"… and {len(trouble) - SHOWN:,} more need a look ({rest}): `invoke status --wide`",
                style="red",
            )
        )
    if not trouble:
        lines.append(Text("every node runs, certified nodes serve", style="green"))
    lines.append(Text("every node's row: `invoke status --wide` or `--json`", style="dim"))
    return Group(t, *lines)
