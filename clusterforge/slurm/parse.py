"""Pure parsers for what Slurm prints: ``sinfo -N -o "%N %T %E"``, ``scontrol show node|reservation``.

Tested on output captured from Slurm 22.05 (``tests/data/slurm/``). Kept free of I/O so that the
admission logic can be tested without a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

SINFO_FORMAT = "%N %T %E"  # node, long state (with suffix flags), reason

# sinfo(1) "NODE STATE CODES": a suffix character after the state names a flag.
STATE_SUFFIXES = {
    "*": "not_responding",
    "~": "powered_off",
    "#": "powering_up",
    "!": "pending_power_down",
    "%": "powering_down",
    "$": "maintenance",
    "@": "pending_reboot",
    "^": "reboot_issued",
    "-": "planned",
}

# Base states in which the scheduler may start user work on the node.
_SERVING = {"idle", "allocated", "mixed", "completing", "planned"}


@dataclass(frozen=True)
class SinfoNode:
    name: str
    state: str  # base state without suffix, e.g. "idle", "drained", "draining", "maint"
    flags: frozenset[str] = field(default_factory=frozenset)
    reason: str = ""  # "" when sinfo prints "none"

    @property
    def drained(self) -> bool:
        return self.state in ("drained", "draining", "drain")

    @property
    def responding(self) -> bool:
        return "not_responding" not in self.flags and self.state not in ("down", "fail", "unknown")

    @property
    def in_maintenance(self) -> bool:
        return "maintenance" in self.flags or self.state == "maint"

    @property
    def serving(self) -> bool:
        """May take user jobs now: up, not drained, not held by a maintenance reservation."""
        return self.state in _SERVING and self.responding and not self.in_maintenance

    @property
    def display(self) -> str:
        suffix = "".join(k for k, v in STATE_SUFFIXES.items() if v in self.flags)
        return self.state + suffix


def parse_state(raw: str) -> tuple[str, frozenset[str]]:
    """``drained$`` -> ("drained", {"maintenance"}); ``idle*`` -> ("idle", {"not_responding"})."""
    flags = set()
    state = raw.strip()
    while state and state[-1] in STATE_SUFFIXES:
        flags.add(STATE_SUFFIXES[state[-1]])
        state = state[:-1]
    return state.lower(), frozenset(flags)


def parse_sinfo(text: str) -> dict[str, SinfoNode]:
    """Rows of ``sinfo -N -o "%N %T %E"`` (header optional) by node name.

    The reason is the rest of the line (it contains spaces); sinfo prints ``none`` for no reason.
    A node in several partitions is printed once per partition: the rows are identical.
    """
    nodes: dict[str, SinfoNode] = {}
    for line in text.splitlines():
        parts = line.strip().split(None, 2)
        if len(parts) < 2 or parts[0] == "NODELIST":
            continue
        state, flags = parse_state(parts[1])
        reason = parts[2].strip() if len(parts) == 3 else ""
        nodes[parts[0]] = SinfoNode(parts[0], state, flags, "" if reason == "none" else reason)
    return nodes


_KEY = re.compile(r"(?:(?<=\s)|^)([A-Za-z][A-Za-z0-9_:]*)=")
# Keys whose value runs to the end of the line (it may contain spaces and '=').
_REST_OF_LINE = {"Reason", "OS", "Comment", "Extra"}


def parse_scontrol_records(text: str) -> list[dict[str, str]]:
    """``scontrol show node|reservation`` output: one dict per record (records are blank-line separated).

    Values run to the next ``Key=``, except keys like ``Reason`` whose value is free text to the
    end of the line.
    """
    records: list[dict[str, str]] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        if not block.strip() or "=" not in block:
            continue
        record: dict[str, str] = {}
        for line in block.splitlines():
            line = line.strip()
            pos = 0
            matches = list(_KEY.finditer(line))
            for i, match in enumerate(matches):
                if match.start() < pos:
                    continue
                key = match.group(1)
                if key in _REST_OF_LINE:
                    record[key] = line[match.end() :].strip()
                    break
                end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
                record[key] = line[match.end() : end].strip()
                pos = end
        records.append(record)
    return records


_REASON_STAMP = re.compile(r"^(?P<text>.*?)\s*\[(?P<user>[^@\]]+)@(?P<time>[^\]]+)\]$")


def split_reason(reason: str) -> tuple[str, str, str]:
    """``clusterforge: certifying [root@2026-11-30T03:29:04]`` -> (text, user, time)."""
    match = _REASON_STAMP.match(reason.strip())
    if not match:
        return reason.strip(), "", ""
    return match.group("text"), match.group("user"), match.group("time")


def expand_hostlist(expr: str) -> list[str]:
    """Slurm host list to names: ``node-[001-003,007],head-001`` -> node-001 … node-003, node-007, head-001."""
    expr = expr.strip()
    if not expr or expr == "(null)":
        return []
    names: list[str] = []
    for item in re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", expr):
        match = re.fullmatch(r"(?P<prefix>[^\[]*)\[(?P<ranges>[^\]]+)\](?P<suffix>.*)", item)
        if not match:
            names.append(item)
            continue
        for part in match.group("ranges").split(","):
            lo, _, hi = part.partition("-")
            if not hi:
                names.append(f"{match.group('prefix')}{lo}{match.group('suffix')}")
                continue
            width = len(lo)
            for i in range(int(lo), int(hi) + 1):
                names.append(f"{match.group('prefix')}{i:0{width}d}{match.group('suffix')}")
    return names


_NUMBERED = re.compile(r"^(?P<prefix>.*?)(?P<number>\d+)(?P<suffix>[^\d\[\],]*)$")


def compress_hostlist(names: Iterable[str]) -> str:
    """Names to one Slurm host list: ``node-001 … node-003, node-007`` -> ``node-[001-003,007]``.

    What scontrol and sinfo take wherever a node list goes (``NodeName=``, ``Nodes=``, ``-w``), so
    one command names any number of nodes in a few bytes where they are numbered in a run.
    A range keeps the width of its first number, zero-padded as Slurm prints it (hostlist.c
    ``%0*lu``): ``[999-1000]`` of width 3 is ``999, 1000``. ``expand_hostlist`` is the inverse.
    """
    groups: dict[tuple[str, str], list[str]] = {}
    plain: list[str] = []
    for name in sorted(set(names)):
        match = _NUMBERED.match(name)
        if match is None or "[" in name or "," in name:
            plain.append(name)
            continue
        groups.setdefault((match.group("prefix"), match.group("suffix")), []).append(match.group("number"))
    parts = list(plain)
    for (prefix, suffix), numbers in sorted(groups.items()):
        ranges: list[str] = []
        lo = prev = ""
        for text in sorted(numbers, key=lambda t: (int(t), len(t))):
            if lo and int(text) == int(prev) + 1 and text == f"{int(text):0{len(lo)}d}":
                prev = text
                continue
            if lo:
                ranges.append(lo if lo == prev else f"{lo}-{prev}")
            lo = prev = text
        ranges.append(lo if lo == prev else f"{lo}-{prev}")
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]}{suffix}")
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]{suffix}")
    return ",".join(parts)


@dataclass(frozen=True)
class Reservation:
    name: str
    nodes: tuple[str, ...]
    flags: frozenset[str]
    state: str


def parse_reservations(text: str) -> dict[str, Reservation]:
    """``scontrol show reservation`` by name ("No reservations in the system" -> {})."""
    out: dict[str, Reservation] = {}
    for rec in parse_scontrol_records(text):
        name = rec.get("ReservationName")
        if not name:
            continue
        flags = frozenset(f for f in rec.get("Flags", "").split(",") if f)
        out[name] = Reservation(
            name, tuple(expand_hostlist(rec.get("Nodes", ""))), flags, rec.get("State", "")
        )
    return out
