"""A plan for people (a rich table), for a pull-request comment (markdown) and for tools (JSON).

People read groups: nodes with the same change share a line named by their Slurm host list
(``gpu-[001-016]: configure nccl, re-certify``), so a version bump on 4,096 nodes is one line,
and a node that differs stands out on its own. The markdown stays under GitHub's 65,536-character
comment limit at any size (``MARKDOWN_LIMIT``) and says what it left out; the JSON keeps every
node (``nodes``) beside the groups.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.text import Text

from clusterforge.plan.impact import NodeImpact, pending
from clusterforge.slurm.parse import compress_hostlist

PLAN_JSON_VERSION = 1
# GitHub refuses a comment body over 65,536 characters (its REST API: "body is too long (maximum
# is 65536 characters)"); the plan keeps a margin for what a workflow wraps around it.
MARKDOWN_LIMIT = 60_000
TABLE_GROUPS = 20  # groups a terminal table shows; the rest are counted


@dataclass(frozen=True)
class ChangeGroup:
    """Nodes whose change is the same: one line for people."""

    nodes: tuple[str, ...]
    sample: NodeImpact  # what every node of the group gets (its jobs aside)
    jobs: int  # jobs running on the group's nodes that a drain waits for

    @property
    def hostlist(self) -> str:
        return compress_hostlist(self.nodes)

    def as_dict(self) -> dict[str, Any]:
        s = self.sample
        return {
            "nodes": self.hostlist,
            "count": len(self.nodes),
            "pool": s.pool,
            "actions": s.actions(),
            "configure": list(s.configure),
            "reasons": list(s.reasons),
            "jobs": self.jobs,
        }


def group_changes(impacts: list[NodeImpact]) -> list[ChangeGroup]:
    """The changed nodes grouped by what they get (pool, provision, roles, reboot, re-certify,
    drain, reasons), in the order each group first appears."""
    groups: dict[tuple[Any, ...], list[NodeImpact]] = {}
    for i in impacts:
        if not i.changed:
            continue
        key = (i.pool, i.role, i.provision, i.configure, i.reboot, i.recertify, i.drain, i.reasons)
        groups.setdefault(key, []).append(i)
    return [
        ChangeGroup(tuple(i.node for i in members), members[0], sum(len(i.jobs) for i in members))
        for members in groups.values()
    ]


@dataclass(frozen=True)
class Plan:
    stack: str
    base: str  # where the base came from, e.g. "main" or "last applied state (journal)"
    new: str  # "working tree"
    impacts: list[NodeImpact]
    notes: tuple[str, ...] = ()  # what could not be asked (Slurm, the provider), and why
    extra: dict[str, Any] = field(default_factory=dict)
    data: tuple[str, ...] = ()  # data-holding resources replaced or deleted (LiveState.data)

    @property
    def changed(self) -> list[NodeImpact]:
        return [i for i in self.impacts if i.changed]

    @property
    def pending(self) -> bool:
        return pending(self.impacts) or bool(self.data)

    def counts(self) -> dict[str, int]:
        """How many nodes get each action, e.g. {"configure": 4, "re-certify": 4}."""
        return dict(Counter(a for i in self.impacts for a in i.actions()))

    def headline(self) -> str:
        if not self.pending:
            return f"stack {self.stack}: no changes ({self.new} against {self.base})"
        data = f"; DATA AT RISK: {len(self.data)} resource(s) replaced or deleted" if self.data else ""
        if not self.changed:
            return f"stack {self.stack}: no node changes{data} ({self.new} against {self.base})"
        counts = self.counts()
        order = ("create", "replace", "destroy", "configure", "reboot", "re-certify", "drain")
        parts = [f"{counts[a]} to {a}" for a in order if counts.get(a)]
        return (
            f"stack {self.stack}: {len(self.changed)} of {len(self.impacts)} node(s) change: "
            + ", ".join(parts)
            + data
            + f" ({self.new} against {self.base})"
        )


def _yes(flag: bool) -> str:
    return "yes" if flag else ""


def _drain(group: ChangeGroup) -> str:
    if not group.sample.drain:
        return ""
    if len(group.nodes) == 1:
        jobs = group.sample.jobs
        return f"{len(jobs)} job(s): {', '.join(jobs)}" if jobs else "no jobs"
    return f"{group.jobs} job(s) running" if group.jobs else "no jobs"


def _row(group: ChangeGroup) -> list[str]:
    s = group.sample
    return [
        group.hostlist,
        str(len(group.nodes)),
        s.pool,
        s.provision,
        ", ".join(s.configure),
        _yes(s.reboot),
        _yes(s.recertify),
        _drain(group),
        "; ".join(s.reasons),
    ]


COLUMNS = ("nodes", "count", "pool", "provision", "configure", "reboot", "re-certify", "drain", "why")


def _left_out(groups: list[ChangeGroup], shown: int) -> str:
    rest = groups[shown:]
    nodes = sum(len(g.nodes) for g in rest)
    return (
        f"{len(rest)} more group(s) of changes ({nodes} node(s)) left out here: "
        "`invoke plan --format json` lists every node"
    )


def _actions(group: ChangeGroup) -> str:
    """``configure nccl, slurm, re-certify, drain (3 jobs)``: what the group's nodes get."""
    s = group.sample
    parts: list[str] = [] if s.provision == "keep" else [s.provision]
    if s.configure:
        parts.append("configure " + ", ".join(s.configure))
    if s.reboot:
        parts.append("reboot")
    if s.recertify:
        parts.append("re-certify")
    if s.drain:
        parts.append(f"drain ({_drain(group)})")
    return ", ".join(parts)


def table(plan: Plan) -> Group:
    """For a terminal: the headline, then per group of nodes with the same change (``TABLE_GROUPS``
    at most) a line ``<host list> (<count>, <pool>): <what they get>`` and its reasons indented."""
    lines: list[Text] = [Text(plan.headline(), style="bold")]
    groups = group_changes(plan.impacts)
    for group in groups[:TABLE_GROUPS]:
        line = Text("  ")
        line.append(group.hostlist, style="bold")
        line.append(f" ({len(group.nodes)}, {group.sample.pool}): {_actions(group)}")
        lines.append(line)
        if group.sample.reasons:
            lines.append(Text("      " + "; ".join(group.sample.reasons), style="dim"))
    if len(groups) > TABLE_GROUPS:
        lines.append(Text("  " + _left_out(groups, TABLE_GROUPS), style="yellow"))
    return Group(*lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(plan: Plan, limit: int = MARKDOWN_LIMIT) -> str:
    """GitHub-flavoured markdown: a headline, a table of the groups of nodes that change, notes;
    never longer than ``limit`` characters (rows left out are counted in a line that says so)."""
    head = [f"### clusterforge plan: stack `{plan.stack}`", "", plan.headline(), ""]
    # Data-holding resources replaced or deleted come first and are never left out.
    head += [f"> **DATA**: {_cell(line)}" for line in plan.data] + ([""] if plan.data else [])
    tail: list[str] = []
    for note in plan.notes:
        tail.append(f"> note: {_cell(note)[:2000]}")
    if plan.notes:
        tail.append("")
    groups = group_changes(plan.impacts)
    rows: list[str] = []
    if groups:
        rows = ["| " + " | ".join(COLUMNS) + " |", "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    budget = limit - sum(len(line) + 1 for line in head + tail) - 300  # room for the left-out line
    used = sum(len(line) + 1 for line in rows)
    shown = 0
    for group in groups:
        cells = _row(group)
        cells[0] = f"`{cells[0]}`"
        line = "| " + " | ".join(_cell(c) for c in cells) + " |"
        if used + len(line) + 1 > budget:
            break
        rows.append(line)
        used += len(line) + 1
        shown += 1
    if groups:
        rows.append("")
    if shown < len(groups):
        rows += [f"_{_left_out(groups, shown)}_", ""]
    return "\n".join(head + rows + tail)


def to_json(plan: Plan) -> dict[str, Any]:
    return {
        "version": PLAN_JSON_VERSION,
        "stack": plan.stack,
        "base": plan.base,
        "new": plan.new,
        "pending": plan.pending,
        "counts": plan.counts(),
        "notes": list(plan.notes),
        "data": list(plan.data),
        "groups": [g.as_dict() for g in group_changes(plan.impacts)],
        "nodes": [i.as_dict() for i in plan.impacts],
        **plan.extra,
    }


def json_text(plan: Plan) -> str:
    return json.dumps(to_json(plan), indent=2)
