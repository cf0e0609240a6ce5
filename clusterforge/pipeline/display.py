"""Live progress: a row per node (stage, status, current task, ok/changed/failed), and the summary.

On a terminal it is a rich ``Live`` table; elsewhere (CI logs, pipes) each change that matters
is printed as one line, so a log reads top to bottom. Fed from three sources: the scheduler
(stage/status), ansible-runner events (task and counts) and the provider (boot messages).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from clusterforge.ansible.events import HostProgress
from clusterforge.pipeline.scheduler import NodeProgress, Status

_STYLE = {
    Status.WAITING: "dim",
    Status.RUNNING: "cyan",
    Status.DONE: "green",
    Status.FAILED: "red",
    Status.CANCELLED: "yellow",
}


@dataclass
class Row:
    node: str
    role: str = ""
    stage: str = ""
    status: str = "waiting"
    detail: str = ""
    ok: int = 0
    changed: int = 0
    failed: int = 0


class Board:
    def __init__(
        self, nodes: Iterable[tuple[str, str]], console: Console | None = None, live: bool | None = None
    ):
        self.console = console or Console()
        self.rows = {name: Row(name, role) for name, role in nodes}
        self._lock = threading.Lock()
        self._live_wanted = self.console.is_terminal if live is None else live
        self._live: Live | None = None
        # counts carried over from earlier playbooks of the same run (configure, then certify)
        self._base: dict[str, tuple[int, int, int]] = {}

    def __enter__(self) -> Board:
        if self._live_wanted:
            self._live = Live(self.table(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.update(self.table())
            self._live.__exit__(*exc)
            self._live = None

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.table())

    def _say(self, node: str, text: str) -> None:
        if self._live is None:
            self.console.print(f"[bold]{escape(node)}[/bold] {escape(text)}", highlight=False)

    # -- inputs ------------------------------------------------------------------------------

    def stage(self, p: NodeProgress) -> None:
        with self._lock:
            row = self.rows.setdefault(p.name, Row(p.name))
            row.stage, row.status = p.stage, p.status.value
            if p.status is Status.RUNNING:
                row.detail = ""
                self._base[p.name] = (row.ok, row.changed, row.failed)
            elif p.reason:
                row.detail = p.reason
            self._refresh()
        if p.status is Status.WAITING and p.passed and p.passed[-1] in p.notes:
            self._say(p.name, f"{p.passed[-1]}: done - {p.notes[p.passed[-1]]}")
        elif p.status is not Status.WAITING or p.reason:
            self._say(p.name, f"{p.stage}: {p.status.value}" + (f" - {p.reason}" if p.reason else ""))

    def host(self, h: HostProgress) -> None:
        with self._lock:
            row = self.rows.get(h.host)
            if row is None:
                return
            base = self._base.get(h.host, (0, 0, 0))
            row.ok, row.changed, row.failed = (
                base[0] + h.ok,
                base[1] + h.changed,
                base[2] + h.failed + h.unreachable,
            )
            new_task = h.task != row.detail
            row.detail = h.task
            self._refresh()
        if new_task and h.task:
            self._say(h.host, f"  {h.task}")

    def note(self, node: str, message: str) -> None:
        with self._lock:
            if node in self.rows:
                self.rows[node].detail = message
            self._refresh()
        self._say(node, message)

    # -- output ------------------------------------------------------------------------------

    def table(self) -> Table:
        table = Table(title=None, expand=False)
        for col in ("node", "role", "stage", "status", "current", "ok", "changed", "failed"):
            table.add_column(col, justify="right" if col in ("ok", "changed", "failed") else "left")
        for row in self.rows.values():
            style = _STYLE.get(Status(row.status), "") if row.status in Status._value2member_map_ else ""
            table.add_row(
                row.node, row.role, row.stage, f"[{style}]{row.status}[/{style}]" if style else row.status,
                escape((row.detail[:70] + "…") if len(row.detail) > 71 else row.detail),
                str(row.ok), str(row.changed), str(row.failed),
            )  # fmt: skip
        return table
