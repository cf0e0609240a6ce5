"""A plan for people (a rich table), for a pull-request comment (markdown) and for tools (JSON)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape
from rich.table import Table

from clusterforge.plan.impact import NodeImpact, pending

PLAN_JSON_VERSION = 1


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


def _jobs(impact: NodeImpact) -> str:
    if not impact.drain:
        return ""
    return f"{len(impact.jobs)} job(s): {', '.join(impact.jobs)}" if impact.jobs else "no jobs"


def table(plan: Plan) -> Table:
    out = Table(title=escape(plan.headline()), title_justify="left")
    for col in ("node", "pool", "provision", "configure", "reboot", "re-certify", "drain", "why"):
        out.add_column(col)
    for i in plan.changed:
        out.add_row(
            i.node,
            i.pool,
            i.provision,
            ", ".join(i.configure),
            _yes(i.reboot),
            _yes(i.recertify),
            _jobs(i) or "",
            escape("; ".join(i.reasons)),
        )
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(plan: Plan) -> str:
    """GitHub-flavoured markdown: a headline, a table of the nodes that change, notes."""
    lines = [f"### clusterforge plan: stack `{plan.stack}`", "", plan.headline(), ""]
    if plan.changed:
        lines += [
            "| node | pool | provision | configure | reboot | re-certify | drain | why |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for i in plan.changed:
            row = [
                f"`{i.node}`",
                i.pool,
                i.provision,
                ", ".join(i.configure),
                _yes(i.reboot),
                _yes(i.recertify),
                _jobs(i),
                "; ".join(i.reasons),
            ]
            lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
        lines.append("")
    for line in plan.data:
        lines.append(f"> **DATA**: {_cell(line)}")
    if plan.data:
        lines.append("")
    for note in plan.notes:
        lines.append(f"> note: {_cell(note)}")
    if plan.notes:
        lines.append("")
    return "\n".join(lines)


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
        "nodes": [i.as_dict() for i in plan.impacts],
        **plan.extra,
    }


def json_text(plan: Plan) -> str:
    return json.dumps(to_json(plan), indent=2)
