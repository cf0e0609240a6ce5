"""ansible-runner events -> per-host progress and failures (pure; tested on recorded runs).

An event is the dict ansible-runner hands to ``event_handler`` (and writes to
``artifacts/<ident>/job_events/*.json``): ``event`` names the callback (``runner_on_ok``,
``runner_on_failed`` …) and ``event_data`` carries ``host``, ``task``, ``role`` and ``res``.
Results of ``no_log`` tasks are already censored by Ansible; ``redact`` also removes any known
secret value (the cluster's munge key) from the one line we show, in case a task leaks it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

_COUNTED = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
    "runner_item_on_failed": None,  # a failed loop item; the task's own runner_on_failed follows
}

# The callbacks that end one task on one host (a loop's items are inside its task's result).
RESULT_EVENTS = frozenset(name for name, kind in _COUNTED.items() if kind)

CENSORED = "(censored)"


@dataclass
class HostProgress:
    host: str
    task: str = ""
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0
    ignored: int = 0
    changed_tasks: list[str] = field(default_factory=list)  # what a converged re-run should not show

    @property
    def broken(self) -> bool:
        return self.failed > 0 or self.unreachable > 0


@dataclass(frozen=True)
class TaskFailure:
    host: str
    task: str
    role: str
    message: str  # one line, redacted
    unreachable: bool = False
    task_path: str = ""

    def render(self) -> str:
        where = f"{self.role} : {self.task}" if self.role else self.task
        kind = "unreachable" if self.unreachable else "failed"
        return f"TASK [{where}] {kind} on {self.host}: {self.message}"


def secret_forms(secrets: Iterable[bytes]) -> list[str]:
    """Every form a secret could be printed in: raw text (when decodable), base64 (slurp), hex."""
    out: list[str] = []
    for raw in secrets:
        if not raw:
            continue
        out.append(base64.b64encode(raw).decode())
        out.append(raw.hex())
        try:
            text = raw.decode().strip()
            if len(text) >= 8:
                out.append(text)
        except UnicodeDecodeError:
            pass
    return out


def redact(text: str, forms: Iterable[str]) -> str:
    for form in forms:
        if form and form in text:
            text = text.replace(form, CENSORED)
    return text


def _redacted(value: Any, forms: list[str]) -> Any:
    if isinstance(value, str):
        return redact(value, forms)
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = _redacted(item, forms)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = _redacted(item, forms)
    return value


def redact_event(event: dict[str, Any], forms: Iterable[str]) -> dict[str, Any]:
    """Remove the secret forms from every string of one event, in place (before it is written)."""
    forms = [f for f in forms if f]
    return _redacted(event, forms) if forms else event


def _one_line(res: dict[str, Any]) -> str:
    if res.get("censored"):
        return str(res["censored"])
    parts = []
    msg = res.get("msg")
    if msg:
        parts.append(str(msg))
    for key in ("stderr", "stdout"):
        value = str(res.get(key) or "").strip()
        if value:
            parts.append(value.splitlines()[-1])
            break
    if not parts and res.get("results"):  # a loop: the first failed item says why
        for item in res["results"]:
            if isinstance(item, dict) and item.get("failed"):
                return _one_line(item)
    line = ": ".join(parts) if parts else "failed (no message)"
    return " ".join(line.split())


class ProgressModel:
    """Folds events into per-host progress; remembers the failing task of each host."""

    def __init__(self, hosts: Iterable[str] = (), secrets: Iterable[bytes] = ()):
        self.hosts: dict[str, HostProgress] = {h: HostProgress(h) for h in hosts}
        self.failures: dict[str, TaskFailure] = {}
        self._forms = secret_forms(secrets)
        self.stats: dict[str, dict[str, int]] = {}

    def set_secrets(self, secrets: Iterable[bytes]) -> None:
        """Secrets that became known during the run (the munge key the run created)."""
        self._forms = secret_forms(secrets)

    def host(self, name: str) -> HostProgress:
        return self.hosts.setdefault(name, HostProgress(name))

    def apply(self, event: dict[str, Any]) -> str | None:
        """Update from one event; returns the host it touched (for a display refresh), if any."""
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        if kind == "playbook_on_stats":
            self.stats = {k: dict(v) for k, v in data.items() if isinstance(v, dict)}
            return None
        host = data.get("host")
        if not host:
            return None
        progress = self.host(host)
        task = redact(str(data.get("task") or ""), self._forms)
        if kind == "runner_on_start":
            progress.task = task
            return host
        counter = _COUNTED.get(kind)
        if counter is None:
            return None
        res = data.get("res") or {}
        if kind == "runner_on_failed" and data.get("ignore_errors"):
            progress.ignored += 1
            return host
        setattr(progress, counter, getattr(progress, counter) + 1)
        if kind == "runner_on_ok" and res.get("changed"):
            progress.changed += 1
            progress.changed_tasks.append(f"{data.get('role')} : {task}" if data.get("role") else task)
        if kind in ("runner_on_failed", "runner_on_unreachable") and host not in self.failures:
            self.failures[host] = TaskFailure(
                host=host,
                task=task,
                role=str(data.get("role") or ""),
                message=redact(_one_line(res), self._forms),
                unreachable=kind == "runner_on_unreachable",
                task_path=str(data.get("task_path") or ""),
            )
        return host

    def changed_total(self) -> int:
        return sum(p.changed for p in self.hosts.values())
