"""Parse NVIDIA Xid events from kernel log text (dmesg, dmesg -T, journalctl / syslog, bare lines).

Line forms seen across drivers:
    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 ...
    NVRM: Xid (0000:af:00): 48, pid='<unknown>', name=<unknown>, Ch 00000008
    NVRM: Xid (PCI:0000:70:00): 13, Graphics SM Warp Exception ...        (recent drivers: no pid)
with any prefix: `[ 1843.308145] `, `[Wed Jun 24 15:44:20 2026] `, `Feb 14 05:03:41 host kernel: `,
`2024-08-30T11:43:09,123456+00:00 ` (dmesg --time-format iso), `kern  :warn  : [ 12.3] ` (dmesg -x).
A GPU can also fall off the bus with no Xid line at all ("NVRM: The NVIDIA GPU 0000:b3:00.0 ...
fallen off the bus"); those are reported separately in `bus_drops`.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?)\):?\s*(\d+)\b,?\s*(.*)$"
)
_PID = re.compile(r"^pid=(?:'?<unknown>'?|(\d+)),?\s*")
_NAME = re.compile(r"^name=([^,]*),?\s*")
_PREFIX_TIME = re.compile(
    r"^\s*(?:[a-z]+\s*:[a-z]+\s*:\s*)?(?:\[\s*(?P<uptime>\d+\.\d+)\]|\[(?P<ctime>[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ [\d:]+ \d{4})\]"
    r"|(?P<iso>\d{4}-\d{2}-\d{2}T[\d:.,]+(?:Z|[+-]\d{2}:?\d{2})?)|(?P<syslog>[A-Z][a-z]{2} +\d+ [\d:.]+)\s+(?P<host>\S+))"
)
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)")
_BUS_DROP = re.compile(r"NVRM: The NVIDIA GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])")

# Which side an Xid usually points at. Sources: NVIDIA "XID Errors" catalogue
# (docs.nvidia.com/deploy/xid-errors/) and its recommended actions; the split used by
# facebookresearch/gcm and NVIDIA k8s-device-plugin (13, 31, 43, 45, 68 are skipped as application
# errors there). 45 is "preemptive cleanup, due to previous errors": it follows other Xids.
NODE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140, 154})
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68})


def classify_xid(xid: int) -> str:
    """'node' (hardware/driver: drain or reset), 'application' (the job's own fault) or 'unknown'."""
    if xid in NODE_XIDS:
        return "node"
    if xid in APPLICATION_XIDS:
        return "application"
    return "unknown"


def _timestamp(prefix: str) -> Optional[str]:
    match = _PREFIX_TIME.match(prefix)
    if not match:
        return None
    for key in ("uptime", "ctime", "iso", "syslog"):
        if match.group(key):
            return match.group(key)
    return None


def parse_xid(text: str) -> Dict[str, Any]:
    """Parse Xid events from kernel log text. See the package docstring for the fields."""
    events: List[Dict[str, Any]] = []
    bus_drops: List[Dict[str, Any]] = []
    lines = text.splitlines()
    for number, line in enumerate(lines):
        match = _XID.search(line)
        if match:
            rest = match.group(3).strip()
            pid: Optional[int] = None
            name: Optional[str] = None
            pid_match = _PID.match(rest)
            if pid_match:
                pid = int(pid_match.group(1)) if pid_match.group(1) else None
                rest = rest[pid_match.end() :]
            name_match = _NAME.match(rest)
            if name_match:
                name = None if name_match.group(1) in ("<unknown>", "'<unknown>'") else name_match.group(1)
                rest = rest[name_match.end() :]
            xid = int(match.group(2))
            cause = _CAUSED_BY.search(rest)
            events.append(
                {
                    "pci": match.group(1).lower(),
                    "xid": xid,
                    "pid": pid,
                    "process": name,
                    "message": rest.strip(),
                    "class": classify_xid(xid),
                    "caused_by": int(cause.group(1)) if cause else None,
                    "timestamp": _timestamp(line[: match.start()]),
                    "line": number + 1,
                }
            )
            continue
        drop = _BUS_DROP.search(line)
        if drop and "fallen off the bus" in " ".join(lines[number : number + 3]):
            bus_drops.append(
                {
                    "pci": drop.group(1).lower(),
                    "timestamp": _timestamp(line[: drop.start()]),
                    "line": number + 1,
                }
            )
    counts: Dict[str, int] = {}
    for event in events:
        counts[str(event["xid"])] = counts.get(str(event["xid"]), 0) + 1
    return {
        "events": events,
        "bus_drops": bus_drops,
        "counts": counts,
        "node_faults": sorted({e["xid"] for e in events if e["class"] == "node"}),
        "ok": not bus_drops and all(e["class"] != "node" for e in events),
    }
