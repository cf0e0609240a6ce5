"""What the health loop on the head node asks of the workstation, read from there (issue 28).

The loop (``clusterforge.health.loop``) keeps its own journal on shared storage. A lemon whose pool's
policy says ``on_lemon: replace``, with no ``replace_hook`` configured, is written to that journal's
``replace_requested`` section: the workstation holds the provider's credentials, so it replaces. This
module asks the head for that section (``python -m clusterforge.health.loop --state``, with the Python
the ``slurm`` role runs the loop with), says which requests are still open (the workstation journal's
``health_replaced`` holds the identity each replace was done for: a request for an identity already
replaced is done), and records a replace once it passed.

Pure parts: ``state_argv``, ``parse_state``, ``open_requests``. I/O: ``read_head_state`` (and
``read_stack_head_state`` through the stack's provider), ``record_replaced``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from clusterforge.health.loop.config import CONFIG_PATH
from clusterforge.health.loop.round import REPLACE_REQUESTED, RMA_FLAGGED
from clusterforge.health.state import HEALTH_STRIKES
from clusterforge.journal import Journal
from clusterforge.node.remote import node_runner
from clusterforge.providers.base import Node
from clusterforge.slurm.admission import Runner
from clusterforge.spec.models import ClusterSpec

# roles/slurm/defaults/main.yml's slurm_health_loop_python (tests/health/test_head_state.py holds them equal)
HEAD_PYTHON = "/opt/clusterforge/venv/bin/python"
REPLACED = "health_replaced"  # workstation journal: node -> {identity, at, why}: the replace done for it


class HeadStateError(ValueError):
    """The head's answer cannot be read; the message says what it said and what to do."""


@dataclass(frozen=True)
class ReplaceRequest:
    node: str
    identity: str
    strikes: int
    why: str
    at: str


@dataclass
class HeadState:
    replace_requested: dict[str, ReplaceRequest] = field(default_factory=dict)
    rma_flagged: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    strikes: list[Mapping[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def state_argv(python: str = HEAD_PYTHON, config: str = CONFIG_PATH) -> list[str]:
    return [python, "-m", "clusterforge.health.loop", "--config", config, "--state"]


def parse_state(stdout: str, where: str = "the head node") -> HeadState:
    """The loop's ``--state`` JSON -> HeadState. A malformed request is a note naming it, never a replace."""
    try:
        data = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise HeadStateError(f"{where}: the loop's --state is not JSON ({exc}): {stdout[:200]!r}") from None
    if not isinstance(data, dict):
        raise HeadStateError(f"{where}: the loop's --state is not a JSON object: {stdout[:200]!r}")
    out = HeadState()
    asked = data.get(REPLACE_REQUESTED) or {}
    if not isinstance(asked, dict):
        raise HeadStateError(f"{where}: {REPLACE_REQUESTED} is {type(asked).__name__}, not an object")
    for node, entry in sorted(asked.items()):
        identity = entry.get("identity") if isinstance(entry, dict) else None
        if not identity:
            out.notes.append(f"{REPLACE_REQUESTED}.{node}: no identity in {entry!r}: not acted on")
            continue
        try:
            strikes = int(entry.get("strikes") or 0)
        except (TypeError, ValueError):
            strikes = 0
        why, at = str(entry.get("why") or ""), str(entry.get("at") or "")
        out.replace_requested[str(node)] = ReplaceRequest(str(node), str(identity), strikes, why, at)
    flagged = data.get(RMA_FLAGGED) or {}
    out.rma_flagged = {str(n): e for n, e in flagged.items()} if isinstance(flagged, dict) else {}
    recorded = data.get(HEALTH_STRIKES) or []
    out.strikes = [s for s in recorded if isinstance(s, dict)] if isinstance(recorded, list) else []
    return out


def read_head_state(
    live: Mapping[str, Node], heads: list[str], runner: Callable[..., Runner] = node_runner
) -> tuple[HeadState | None, str]:
    """Ask the first running head node; (None, why) when there is none or it cannot answer."""
    for name in heads:
        node = live.get(name)
        if node is None or node.state != "running":
            continue
        rc, out, err = runner(node, timeout_s=60)(state_argv())
        if rc in (126, 127):  # the shell or the engine: no such executable
            return None, (
                f"{name} has no {HEAD_PYTHON} with clusterforge: the health loop is not installed there "
                "(docs/health.md)"
            )
        if rc == 1 and CONFIG_PATH in err:
            return None, f"{name}: the health loop is not configured ({err.strip()[-200:]})"
        if rc != 0:
            return None, f"{name}: the loop's --state exited {rc}: {(err or out).strip()[-300:]}"
        try:
            return parse_state(out, name), ""
        except HeadStateError as exc:
            return None, str(exc)
    return None, "no running head node"


def stack_heads(spec: ClusterSpec) -> tuple[dict[str, Node], list[str]]:
    """The stack's nodes as its provider sees them now, and the names of the spec's head nodes."""
    from clusterforge.providers import get_provider

    live = {n.name: n for n in get_provider(spec).nodes(spec)}
    return live, [name for pool in spec.pools_with_role("head") for name in spec.node_names(pool)]


def read_stack_head_state(spec: ClusterSpec) -> tuple[HeadState | None, str]:
    """``read_head_state`` over the stack's provider: its running nodes and the spec's head pools."""
    return read_head_state(*stack_heads(spec))


def open_requests(state: HeadState, journal: Journal) -> list[ReplaceRequest]:
    """The requests not yet done: no replace recorded for that node, or one for another identity."""
    done = journal.section(REPLACED) or {}
    open_ = []
    for node, request in sorted(state.replace_requested.items()):
        entry = done.get(node) if isinstance(done, dict) else None
        if isinstance(entry, dict) and entry.get("identity") == request.identity:
            continue
        open_.append(request)
    return open_


def record_replaced(journal: Journal, request: ReplaceRequest, at: str) -> None:
    """The replace the loop asked for is done (a passed replace): never asked again for that identity."""
    done = journal.section(REPLACED) or {}
    journal.set_section(REPLACED, {**(done if isinstance(done, dict) else {}), request.node: {
        "identity": request.identity, "at": at, "why": request.why,
    }})  # fmt: skip


def with_head_strikes(
    spec: ClusterSpec,
    sections: dict[str, Any],
    live: dict[str, Node],
    heads: list[str],
    runner: Callable[..., Runner],
) -> dict[str, Any]:
    """The journal's sections with the strikes the head node's health loop recorded added, where the
    spec runs the loop and the head answers. A strike both journals hold counts once: the reader
    (``health.state.read_inputs``) keeps one per identity, time and reason (``strikes.dedupe``)."""
    from clusterforge.health.loop.render import loop_enabled

    if not loop_enabled(spec):
        return sections
    state, _ = read_head_state(live, heads, runner)
    if state is None or not state.strikes:
        return sections
    return {**sections, HEALTH_STRIKES: [*(sections.get(HEALTH_STRIKES) or []), *state.strikes]}
