"""Live progress that scales: a summary line per stage and pool, and the nodes that fail or lag.

At thousands of nodes a row per node is a wall nobody reads (and rebuilding it per event made the
board cost grow with the square of the nodes). So the board keeps counts per (stage, pool),
updated in constant time per event, and shows:

- a line per stage and pool: how many nodes wait, run, are done and failed, and the task most of
  the running nodes are in;
- the failing nodes with their reasons, and the slow ones: still running a stage at least twice
  as long as the median node of their pool took for it, once half of that pool has finished it.

On a terminal it is a rich ``Live`` view, drawn at its refresh rate from the counts (never per
event). Elsewhere (CI logs, pipes) each change is printed as one line while the fleet is small
(``DETAIL_LIMIT`` nodes); above that, failures and notes for several nodes at once are printed
as they come, and a stage and pool's counts at most every ``SUMMARY_EVERY_S`` seconds and when it
empties. Per-node detail lives in `status --json`, the journal and the reports. Fed from three
sources: the scheduler (stage/status), ansible-runner events (task and counts) and the provider
(boot messages).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from clusterforge.ansible.events import HostProgress
from clusterforge.pipeline.scheduler import NodeProgress, Status
from clusterforge.slurm.parse import compress_hostlist

DETAIL_LIMIT = 32  # up to this many nodes, every change of every node is shown
SHOWN = 10  # failing and slow nodes listed by name; the rest are counted
SUMMARY_EVERY_S = 10.0
SLOW_FACTOR = 2.0
SLOW_MIN_S = 30.0
STATES = ("waiting", "running", "done", "failed")


@dataclass
class Row:
    node: str
    pool: str = ""
    stage: str = ""
    status: str = "waiting"
    detail: str = ""
    ok: int = 0
    changed: int = 0
    failed: int = 0
    since: float | None = None  # when it began running its current stage
    member: str = ""  # the stage it waits, runs or failed in ("" when it passed them all)
    credited: set[str] = field(default_factory=set)  # stages counted "done" for it


@dataclass
class _Cell:
    """One stage and pool: counts by state, and how long its nodes took to pass the stage."""

    counts: Counter[str] = field(default_factory=Counter)
    took: list[float] = field(default_factory=list)
    last_print: float = 0.0
    printed: tuple[int, ...] = ()


def _state(status: str) -> str:
    return {"done": "done", "failed": "failed", "cancelled": "failed", "running": "running"}.get(
        status, "waiting"
    )


class Board:
    def __init__(
        self,
        nodes: Iterable[tuple[str, str]],
        console: Console | None = None,
        live: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.console = console or Console()
        self.rows = {name: Row(name, pool) for name, pool in nodes}
        self._lock = threading.Lock()
        self._live_wanted = self.console.is_terminal if live is None else live
        self._live: Live | None = None
        self._clock = clock
        # counts carried over from earlier playbooks of the same run (configure, then certify)
        self._base: dict[str, tuple[int, int, int]] = {}
        self._cells: dict[tuple[str, str], _Cell] = defaultdict(_Cell)
        self._stages: list[str] = []  # in the order they were first seen
        self._failed: dict[str, str] = {}  # node -> "<stage>: <reason>"

    @property
    def detailed(self) -> bool:
        return len(self.rows) <= DETAIL_LIMIT

    def __enter__(self) -> Board:
        if self._live_wanted:
            self._live = Live(
                console=self.console, refresh_per_second=4, transient=False, get_renderable=self.view
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.__exit__(*exc)
            self._live = None
        elif not self.detailed:
            for (stage, pool), cell in list(self._cells.items()):
                self._print_cell(stage, pool, cell, force=True)

    def _say(self, text: str) -> None:
        if self._live is None:
            self.console.print(text, highlight=False)

    def _say_node(self, node: str, text: str) -> None:
        if self._live is None and self.detailed:
            self.console.print(f"[bold]{escape(node)}[/bold] {escape(text)}", highlight=False)

    # -- inputs ------------------------------------------------------------------------------

    def _move(self, row: Row, p: NodeProgress) -> list[tuple[str, _Cell]]:
        """Count the node out of where it was and into where it is now, in O(1): a stage it passed
        counts it "done" there for good; it waits, runs or failed in its current stage. Returns
        the (stage, cell) pairs that changed."""
        now = self._clock()
        changed: list[tuple[str, _Cell]] = []
        if row.member:
            cell = self._cells[(row.member, row.pool)]
            cell.counts[_state(row.status)] -= 1
            changed.append((row.member, cell))
        for stage in p.passed:
            if stage in row.credited:
                continue
            row.credited.add(stage)
            cell = self._cells[(stage, row.pool)]
            cell.counts["done"] += 1
            if row.member == stage and row.status == "running" and row.since is not None:
                cell.took.append(now - row.since)
            changed.append((stage, cell))
        status = p.status.value
        if p.stage not in self._stages:
            self._stages.append(p.stage)
        row.member = "" if p.status is Status.DONE else p.stage
        if row.member:
            cell = self._cells[(row.member, row.pool)]
            cell.counts[_state(status)] += 1
            changed.append((row.member, cell))
        if status == "running" and not (row.status == "running" and row.stage == p.stage):
            row.since = now
        row.stage, row.status = p.stage, status
        return changed

    def stage(self, p: NodeProgress) -> None:
        with self._lock:
            row = self.rows.get(p.name)
            if row is None:
                row = self.rows[p.name] = Row(p.name)
            changed = self._move(row, p)
            if p.status is Status.RUNNING:
                row.detail = ""
                self._base[p.name] = (row.ok, row.changed, row.failed)
            elif p.reason:
                row.detail = p.reason
            if p.status in (Status.FAILED, Status.CANCELLED):
                self._failed[p.name] = f"{p.stage}: {p.reason}" if p.reason else p.stage
                if self._live is None and not self.detailed:
                    self.console.print(
                        f"[red]{escape(p.name)} {escape(p.stage)}: {p.status.value}[/red] {escape(p.reason)}",
                        highlight=False,
                    )
            for stage, cell in changed:
                self._print_cell(stage, row.pool, cell)
        if p.status is Status.WAITING and p.passed and p.passed[-1] in p.notes:
            self._say_node(p.name, f"{p.passed[-1]}: done - {p.notes[p.passed[-1]]}")
        elif p.status is not Status.WAITING or p.reason:
            self._say_node(p.name, f"{p.stage}: {p.status.value}" + (f" - {p.reason}" if p.reason else ""))

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
        if new_task and h.task:
            self._say_node(h.host, f"  {h.task}")

    def note(self, node: str, message: str) -> None:
        with self._lock:
            if node in self.rows:
                self.rows[node].detail = message
        if self.detailed:
            self._say_node(node, message)
        elif node in self._failed:
            self._say(f"{escape(node)}: {escape(message)}")

    def note_many(self, nodes: Iterable[str], message: str) -> None:
        """One message for several nodes: one line (their host list) in a log, whatever their number."""
        names = list(nodes)
        with self._lock:
            for node in names:
                if node in self.rows:
                    self.rows[node].detail = message
        if self.detailed:
            for node in names:
                self._say_node(node, message)
        elif names:
            self._say(f"[bold]{escape(compress_hostlist(names))}[/bold] {escape(message)}")

    def _print_cell(self, stage: str, pool: str, cell: _Cell, force: bool = False) -> None:
        """A log line of a stage and pool's counts, at most every SUMMARY_EVERY_S (large fleets)."""
        if self._live is not None or self.detailed:
            return
        counts = tuple(cell.counts[s] for s in STATES)
        now = self._clock()
        settled = counts[1] == 0 and counts[0] == 0
        if counts == cell.printed or not (force or settled or now - cell.last_print >= SUMMARY_EVERY_S):
            return
        cell.printed, cell.last_print = counts, now
        self._say(escape(self._line(stage, pool, cell)))

    # -- output ------------------------------------------------------------------------------

    def _line(self, stage: str, pool: str, cell: _Cell) -> str:
        c = cell.counts
        parts = [f"{c[s]:,} {s}" for s in STATES if c[s]]
        return f"{stage} {pool}: " + ", ".join(parts)

    def slow(self) -> list[tuple[str, float, float]]:
        """(node, seconds in its stage, its pool's median for the stage) of the nodes that lag."""
        now = self._clock()
        out = []
        for row in self.rows.values():
            if row.status != "running" or row.since is None:
                continue
            cell = self._cells.get((row.stage, row.pool))
            if cell is None or not cell.took:
                continue
            finished = len(cell.took)
            if finished * 2 < sum(cell.counts.values()):
                continue
            median = statistics.median(cell.took)
            elapsed = now - row.since
            if elapsed >= max(SLOW_MIN_S, SLOW_FACTOR * median):
                out.append((row.node, elapsed, median))
        return sorted(out, key=lambda s: -s[1])

    def summary(self) -> Table:
        """A line per stage and pool: counts by state and the task most of its running nodes are in."""
        table = Table(title=None, expand=False)
        for col in ("stage", "pool", *STATES, "now"):
            table.add_column(col, justify="right" if col in STATES else "left")
        by_cell: dict[tuple[str, str], list[Row]] = defaultdict(list)
        for row in self.rows.values():
            if row.stage:
                by_cell[(row.stage, row.pool)].append(row)
        for stage in self._stages:
            for pool in sorted({p for s, p in self._cells if s == stage}):
                cell = self._cells[(stage, pool)]
                rows = by_cell.get((stage, pool), [])
                tasks = Counter(r.detail for r in rows if r.status == "running" and r.detail)
                common = ""
                if tasks:
                    task, count = tasks.most_common(1)[0]
                    common = (task[:60] + "…" if len(task) > 61 else task) + (
                        f" ({count:,})" if count > 1 else ""
                    )
                failed = cell.counts["failed"]
                table.add_row(
                    stage, pool, *(f"[red]{failed:,}[/red]" if s == "failed" and failed else f"{cell.counts[s]:,}"
                                   for s in STATES),
                    escape(common),
                )  # fmt: skip
        return table

    def attention(self) -> Text:
        """The failing nodes (with their reasons) and the slow ones, the first SHOWN of each."""
        lines = Text()
        failed = sorted(self._failed.items())
        for node, why in failed[:SHOWN]:
            lines.append(f"FAILED {node} {why[:150]}\n", style="red")
        if len(failed) > SHOWN:
            lines.append(
                f"… and {len(failed) - SHOWN:,} more failed (`invoke status` lists them)\n", style="red"
            )
        slow = self.slow()
        for node, elapsed, median in slow[:SHOWN]:
            row = self.rows[node]
            lines.append(
                f"SLOW {node} {row.stage}: {elapsed:.0f} s, its pool's median {median:.0f} s; {row.detail[:80]}\n",
                style="yellow",
            )
        if len(slow) > SHOWN:
            lines.append(f"… and {len(slow) - SHOWN:,} more slow\n", style="yellow")
        return lines

    def view(self) -> Group:
        with self._lock:
            return Group(self.summary(), self.attention())

    def table(self) -> Group:
        """What the live view shows now (kept for callers that print the board once)."""
        return self.view()
