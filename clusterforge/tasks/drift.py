"""drift: which nodes differ from what their last converge left, without changing anything."""

from __future__ import annotations

import json as jsonlib
import sys

from invoke import Context, task
from invoke.exceptions import Exit

from clusterforge.tasks._cli import friendly, state_read
from clusterforge.tasks.cluster import _HELP_SPEC, _HELP_STACK, load


@task(help={"stack": _HELP_STACK, "spec": _HELP_SPEC, "json": "print JSON (a list, one object per node)"})
@friendly
def drift(c: Context, stack: str = "", spec: str = "", json: bool = False) -> None:
    """Report per node whether the next `up` would converge it, and why (inputs changed, drift
    in a managed package, file or unit, or a digest that cannot be read); exit 1 if any would.

    Changes nothing, on the nodes or in the journal, so it takes no lock (as `status`); while
    another command holds the stack's lock it says so, since a converge under way makes the
    answer momentary."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from clusterforge.drift.report import drift_report
    from clusterforge.providers import get_provider
    from clusterforge.state import holder as current_holder

    cluster = load(stack, spec)
    with state_read(cluster):
        rows = drift_report(cluster, get_provider(cluster))
    if json:
        print(jsonlib.dumps(rows, indent=2))
    else:
        table = Table(title=f"stack {cluster.stack}: drift (nothing is changed)")
        for col in ("node", "next up", "why"):
            table.add_column(col)
        for row in rows:
            table.add_row(row["node"], "converge" if row["converge"] else "skip", escape(row["why"]))
            for change in row["changes"][3:] if len(row["changes"]) > 3 else []:
                table.add_row("", "", escape(change))
        Console().print(table)
    holder = current_holder(cluster)
    if holder is not None:
        print(f"stack {cluster.stack!r} is busy: {holder.describe()}", file=sys.stderr)
    if any(r["converge"] for r in rows):
        raise Exit(code=1)
