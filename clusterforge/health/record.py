"""Recording a strike when a certification fails (the one I/O part of clusterforge.health).

A node's journal record keeps only its last verdict, so an earlier failure would be forgotten by the
next pass; the strike is appended to the journal section ``health_strikes`` at the moment of the
failure instead, held by the hardware: the GPU UUID(s) the reason names, else the machine id.
Entries older than ``KEEP_DAYS`` are dropped on each append so the section stays bounded.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from clusterforge.health.state import HEALTH_STRIKES, epoch
from clusterforge.journal import Journal, now_iso

KEEP_DAYS = 90
_UUID = re.compile(r"\bGPU-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")


def identities_for(reason: str, machine: str) -> list[str]:
    """What the failure is held against: the GPUs its reason names, else the machine."""
    gpus = list(dict.fromkeys(_UUID.findall(reason)))
    return gpus or ([machine] if machine else [])


def record_failure(
    journal: Journal, node: str, reason: str, check: str = "", at: str = ""
) -> list[dict[str, Any]]:
    """Append one strike per identity the failure is held against; returns the entries written."""
    rec = journal.record(node)
    machine = rec.provider_id or str(rec.hardware.get("provider_id") or "")
    when = at or now_iso()
    cutoff = (datetime.now(UTC) - timedelta(days=KEEP_DAYS)).timestamp()

    def recent(item: Any) -> bool:
        seconds = epoch(str(item.get("at") or "")) if isinstance(item, dict) else None
        return seconds is not None and seconds >= cutoff

    written = []
    for identity in identities_for(reason, machine):
        entry = {"identity": identity, "node": node, "at": when, "reason": reason, "check": check}
        journal.append_to_section(HEALTH_STRIKES, entry, keep=recent)
        written.append(entry)
    return written
