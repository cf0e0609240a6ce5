"""The loop's figures for node_exporter's textfile collector on the head node (pure render + one write).

``clusterforge_health.prom``: per node the last check of the loop, its strikes in the policy's window,
whether it is a lemon or asked to be replaced, and its state now with the seconds it has been in it
(the state and since when are kept in ``<stack dir>/health-states.json`` between rounds); per round the
time it ran, whether it paused, and how many checks run. Alert rules:
``roles/monitoring/files/clusterforge-health.rules.yml``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clusterforge.health.loop.slurm import parse_tag
from clusterforge.health.plan import HealthPlan
from clusterforge.health.state import epoch
from clusterforge.journal import NodeRecord, write_atomic
from clusterforge.slurm.parse import SinfoNode

TEXTFILE = "clusterforge_health.prom"
STATES_FILE = "health-states.json"
STATES = ("in-service", "checking", "draining", "drained", "recertifying", "lemon", "held", "unknown")
METRICS = (
    "clusterforge_health_round_timestamp_seconds",
    "clusterforge_health_paused",
    "clusterforge_health_checks_running",
    "clusterforge_health_last_check_timestamp_seconds",
    "clusterforge_health_strikes",
    "clusterforge_health_lemon",
    "clusterforge_health_replace_requested",
    "clusterforge_health_state",
    "clusterforge_health_state_seconds",
)


def node_state(rec: NodeRecord, sn: SinfoNode | None, lemon: bool) -> str:
    kind, _ = parse_tag(rec.certifying)
    if lemon:
        return "lemon"
    if kind == "recertify":
        return "recertifying"
    if kind == "active":
        return "checking"
    if sn is None or not sn.responding:
        return "unknown"
    if sn.state == "draining":
        return "draining"
    if sn.drained:
        return "drained"
    if sn.in_maintenance:
        return "held"
    return "in-service"


def states_now(
    records: Mapping[str, NodeRecord],
    sinfo: Mapping[str, SinfoNode],
    plan: HealthPlan,
    before: Mapping[str, Any],
    now: float,
) -> dict[str, list[Any]]:
    """node -> [state, since]: ``since`` carried over while the state stays the same."""
    out: dict[str, list[Any]] = {}
    for node, rec in records.items():
        lemon = plan.lemons.get(node)
        state = node_state(rec, sinfo.get(node), bool(lemon and lemon.lemon))
        prev = before.get(node)
        since = prev[1] if isinstance(prev, list) and len(prev) == 2 and prev[0] == state else now
        out[node] = [state, since]
    return out


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def render(
    records: Mapping[str, NodeRecord],
    plan: HealthPlan | None,
    states: Mapping[str, list[Any]],
    replace_requested: Mapping[str, Any],
    paused: bool,
    now: float,
) -> str:
    lines: list[str] = []

    def head(name: str, kind: str, help_: str) -> None:
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} {kind}")

    head(METRICS[0], "gauge", "When the health loop's last round ran.")
    lines.append(f"{METRICS[0]} {now:.0f}")
    head(METRICS[1], "gauge", "1 when the last round paused (no Slurm controller answered).")
    lines.append(f"{METRICS[1]} {int(paused)}")
    running = sum(1 for r in records.values() if parse_tag(r.certifying)[0])
    head(METRICS[2], "gauge", "Health jobs of the loop queued or running.")
    lines.append(f"{METRICS[2]} {running}")
    head(METRICS[3], "gauge", "When the node's last check by the loop finished.")
    for node, rec in sorted(records.items()):
        at = epoch(rec.certified_at)
        if at is not None:
            lines.append(f'{METRICS[3]}{{node="{_label(node)}"}} {at:.0f}')
    if plan is not None:
        head(METRICS[4], "gauge", "Strikes the node's worst hardware identity holds in the policy's window.")
        for node, v in sorted(plan.lemons.items()):
            lines.append(f'{METRICS[4]}{{node="{_label(node)}"}} {v.strikes}')
        head(METRICS[5], "gauge", "1 when the node is a lemon (strikes count reached in the window).")
        for node, v in sorted(plan.lemons.items()):
            lines.append(f'{METRICS[5]}{{node="{_label(node)}"}} {int(v.lemon)}')
    head(METRICS[6], "gauge", "1 when the loop asked for the node to be replaced.")
    for node in sorted(records):
        lines.append(f'{METRICS[6]}{{node="{_label(node)}"}} {int(node in replace_requested)}')
    head(METRICS[7], "gauge", "1 for the node's state now (in-service, checking, draining, drained, ...).")
    for node, (state, _) in sorted(states.items()):
        lines.append(f'{METRICS[7]}{{node="{_label(node)}",state="{state}"}} 1')
    head(METRICS[8], "gauge", "Seconds the node has been in its state now.")
    for node, (state, since) in sorted(states.items()):
        lines.append(
            f'{METRICS[8]}{{node="{_label(node)}",state="{state}"}} {max(0.0, now - float(since)):.0f}'
        )
    return "\n".join(lines) + "\n"


def read_states(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def write(textfile_dir: Path, text: str) -> Path | None:
    """Only where node_exporter's folder exists (as the passive check does)."""
    if not textfile_dir.is_dir():
        return None
    path = textfile_dir / TEXTFILE
    write_atomic(path, text)
    return path
