"""A node's hardware identity (machine id, GPU UUIDs/serials) and the history of GPUs that failed.

The machine id is the provider's (container id, EC2 instance id). GPU ids come from the node's
last report: any ``GPU-<uuid>`` (nvidia-smi's UUID form, e.g. ``GPU-8a1b...``) or ``serial
<digits>`` in the ``gpu-inventory`` check's evidence lines. Where the check
records neither (a node without GPUs, or a validators release that does not print them) the
identity has no GPUs and says nothing about them.

``failed_gpus`` (journal section) keeps the GPU ids of machines that were replaced after a
failed certification; `status` flags a node whose GPUs include one of them on another machine:
the provider handed the same bad GPU back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from clusterforge.journal import Journal, now_iso, stack_dir, write_atomic
from clusterforge.node.report_model import CheckResult, NodeReport, ReportError

INVENTORY_CHECK = "gpu-inventory"
FAILED_GPUS = "failed_gpus"
REPLACEMENTS = "replacements"
_UUID = re.compile(r"\bGPU-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_SERIAL = re.compile(r"\bserial(?: number)?\s*[:=]?\s*(\d{6,})\b", re.IGNORECASE)


def fresh_journal(stack: str) -> Journal:
    """The journal as it is on disk now. A ``Journal`` keeps what it loaded and saves it whole, and
    the pipeline's stages write through their own instance: one kept across a certification would
    write its stale node records back over the verdicts."""
    return Journal(stack, stack_dir(stack).parent)


def gpu_ids(checks: Iterable[CheckResult]) -> list[str]:
    """GPU UUIDs and serials named by the gpu-inventory check's evidence, in order, once each."""
    found: list[str] = []
    for check in checks:
        if check.id != INVENTORY_CHECK:
            continue
        for text in check.evidence.lines:
            found += _UUID.findall(text)
            found += [f"serial {s}" for s in _SERIAL.findall(text)]
    return list(dict.fromkeys(found))


def report_gpus(path: str) -> list[str]:
    """The GPU ids of the report at ``path``; none when there is no readable report there."""
    try:
        return gpu_ids(NodeReport.read(Path(path)).checks) if path else []
    except ReportError:
        return []


def identity(journal: Journal, node: str) -> dict[str, Any]:
    """The node's identity as the journal knows it now: machine id and its report's GPU ids."""
    rec = journal.record(node)
    return {"provider_id": rec.provider_id, "gpus": report_gpus(rec.report)}


def record_replacement(
    journal: Journal, node: str, old: dict[str, Any], new: dict[str, Any], old_verdict: str, old_reason: str
) -> None:
    """Journal one replacement; the old machine's GPUs join ``failed_gpus`` when it had failed."""
    history = journal.section(REPLACEMENTS) or []
    history.append({"node": node, "at": now_iso(), "old": old, "new": new, "old_verdict": old_verdict,
                    "old_reason": old_reason})  # fmt: skip
    journal.set_section(REPLACEMENTS, history)
    # Beside the node's reports too, so a report bundle carries the machine's history.
    mine = [h for h in history if h.get("node") == node]
    write_atomic(journal.dir / "reports" / node / "replacements.json", json.dumps(mine, indent=2) + "\n")
    if old_verdict == "fail" and old.get("gpus"):
        failed = journal.section(FAILED_GPUS) or {}
        for gpu in old["gpus"]:
            failed[gpu] = {"node": node, "provider_id": old.get("provider_id", ""), "reason": old_reason,
                           "at": now_iso()}  # fmt: skip
        journal.set_section(FAILED_GPUS, failed)


def seen_failed(journal: Journal, node: str, gpus: list[str], provider_id: str) -> list[str]:
    """One line per GPU of this machine that was on a machine that failed before."""
    failed = journal.section(FAILED_GPUS) or {}
    lines = []
    for gpu in gpus:
        past = failed.get(gpu)
        if past and past.get("provider_id") != provider_id:
            lines.append(
                f"GPU {gpu} was on {past.get('node')} ({past.get('provider_id') or '?'}) when it failed "
                f"at {past.get('at')}: {past.get('reason') or 'no reason recorded'}"
            )
    return lines
