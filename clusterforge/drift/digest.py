"""A node's digest (what its roles manage, as the node has it now) and what differs from a record.

Gathered with one command per node through the same transport admission uses
(clusterforge/node/remote.py): the stdlib probe (probe.py) sent as ``python3 -c``. Cheaper than
an Ansible run: one ``podman exec``/``ssh`` per node, no Python module shipped per task, no facts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from clusterforge.drift.manages import Managed
from clusterforge.node.remote import Runner
from clusterforge.providers.base import Node

PROBE_SOURCE = (Path(__file__).parent / "probe.py").read_text(encoding="utf-8")
PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Gathered:
    """A node's managed items and their states, or why they could not be read (``error``)."""

    items: dict[str, str]
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def probe_argv(managed: Managed) -> list[str]:
    return ["python3", "-c", PROBE_SOURCE, json.dumps(managed.as_probe_input(), sort_keys=True)]


def parse_probe(rc: int, out: str, err: str) -> Gathered:
    """The probe's answer; anything but its JSON with no errors is a digest not gathered."""
    if rc != 0:
        return Gathered({}, f"probe exited {rc}: {(err or out).strip()[-300:] or 'no output'}")
    try:
        data = json.loads(out)
        items = {str(k): str(v) for k, v in data["items"].items()}
        errors = [str(e) for e in data.get("errors") or []]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
        return Gathered({}, f"probe answered no digest: {out.strip()[:200] or err.strip()[:200]}")
    if errors:
        return Gathered(items, "; ".join(errors))
    return Gathered(items)


def gather(node: Node, managed: Managed, runner: Callable[..., Runner]) -> Gathered:
    """One node's digest. Never raises: an unreachable node or a broken transport is an error."""
    try:
        run = runner(node, timeout_s=PROBE_TIMEOUT_S)
        return parse_probe(*run(probe_argv(managed)))
    except Exception as exc:  # noqa: BLE001 - any failure only means "not gathered": converge
        return Gathered({}, f"probe not run: {type(exc).__name__}: {exc}")


def gather_all(
    nodes: Mapping[str, Node], managed: Mapping[str, Managed], runner: Callable[..., Runner]
) -> dict[str, Gathered]:
    """Every node's digest, the commands run side by side (each costs a round trip, not CPU)."""
    names = [n for n in nodes if n in managed]
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(names))) as pool:
        futures = {n: pool.submit(gather, nodes[n], managed[n], runner) for n in names}
        return {n: f.result() for n, f in futures.items()}


# --- what differs --------------------------------------------------------------------------


def _file_change(old: str, new: str) -> str:
    if new == "absent":
        return "removed"
    if old == "absent":
        return "created"
    o, n = old.split(), new.split()
    if len(o) == len(n) == 6 and o[0] == n[0] == "sha256":
        parts = []
        if o[1] != n[1]:
            parts.append("content changed")
        if o[3] != n[3]:
            parts.append(f"mode {o[3]} -> {n[3]}")
        if o[5] != n[5]:
            parts.append(f"owner {o[5]} -> {n[5]}")
        return ", ".join(parts)
    return f"{old} -> {new}"


def _package_change(old: str, new: str) -> str:
    if new == "absent" or " installed" not in f" {new}":
        return f"not installed ({new})" if new != "absent" else "removed"
    o, n = old.split(), new.split()
    parts = []
    if len(o) == 3 and len(n) == 3:
        if o[0] == "hold" and n[0] != "hold":
            parts.append("hold removed")
        elif o[0] != n[0]:
            parts.append(f"selection {o[0]} -> {n[0]}")
        if o[2] != n[2]:
            parts.append(f"version {o[2]} -> {n[2]}")
    return ", ".join(parts) or f"{old} -> {new}"


def item_changes(recorded: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """One phrase per managed item whose state differs from the record, sorted."""
    out = []
    for key in sorted(set(recorded) | set(now)):
        old, new = recorded.get(key), now.get(key)
        if old == new:
            continue
        if old is None or new is None:
            out.append(f"{key}: {'no longer managed' if new is None else 'newly managed'}")
            continue
        kind = key.split(" ", 1)[0]
        what = {"file": _file_change, "package": _package_change}.get(kind, lambda a, b: f"{a} -> {b}")
        out.append(f"{key}: {what(old, new)}")
    return out
