"""Per-stack journal: what `up` has finished for each node, so a second run resumes.

Lives in ``.clusterforge/<stack>/journal.json``. Every write goes to a temporary file in the
same folder, is fsynced, then renamed over the old one (rename is atomic on POSIX), and the
folder is fsynced so the rename itself survives a crash: a reader sees the old journal or the
new one, never half of one. Writes are serialised by a lock because the scheduler's workers
record progress from several threads.

A node's entry is only trusted while it describes the same machine: when the provider reports
another ``provider_id`` (the container or instance was replaced), the entry is reset.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

JOURNAL_VERSION = 1
STATE_ROOT_ENV = "CLUSTERFORGE_STATE_DIR"

# Stages in the order a node passes them. "failed" is not a stage: it is recorded with the
# stage that failed, so a re-run knows where to start again.
STAGES = ("provisioned", "configured", "certified")


REPO_ROOT = Path(__file__).resolve().parents[1]


def state_root() -> Path:
    """Where per-stack state lives: ``$CLUSTERFORGE_STATE_DIR`` or ``<repo>/.clusterforge``."""
    return Path(os.environ.get(STATE_ROOT_ENV) or REPO_ROOT / ".clusterforge").resolve()


def stack_dir(stack: str) -> Path:
    return state_root() / stack


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


@dataclass
class NodeRecord:
    """What is known to be done on one node."""

    provider_id: str = ""
    done: list[str] = field(default_factory=list)  # subset of STAGES, in order
    failed_stage: str = ""
    reason: str = ""
    verdict: str = ""  # "pass" | "fail" | "" (never certified)
    certified_at: str = ""
    profile: str = ""
    report: str = ""  # path of the last report.json on the workstation
    run_id: str = ""  # the certification run that wrote that report (reports carry it too)
    certifying: str = ""  # run id while a certification is under way; left set if it was cut short
    updated: str = ""
    # What the last successful converge gave this node (clusterforge.plan.applied): the base
    # `invoke plan` compares with when no --base is given.
    applied: dict[str, Any] = field(default_factory=dict)
    # The drift baseline (clusterforge.drift.decide.Baseline): input fingerprints and the digest of
    # what the roles manage, right after the last successful converge; {} when none is trusted.
    drift: dict[str, Any] = field(default_factory=dict)
    # The pinned version set (``<role>_*_version``) the node was last certified with by `invoke
    # upgrade`/`replace`, so `status` can show a rollout's mixed versions.
    versions: dict[str, str] = field(default_factory=dict)
    # The machine's identity when it was last certified: provider_id and GPU UUIDs/serials.
    hardware: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeRecord:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves either the old or the new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class JournalError(Exception):
    pass


class Journal:
    """Thread-safe per-node progress of one stack, persisted on every change."""

    def __init__(self, stack: str, root: Path | None = None):
        self.stack = stack
        self.dir = (root or state_root()) / stack
        self.path = self.dir / "journal.json"
        self._lock = threading.Lock()
        self.nodes: dict[str, NodeRecord] = {}
        # Stack-wide records beside the nodes' (e.g. "rollout", "replacements", "failed_gpus").
        self.sections: dict[str, Any] = {}
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise JournalError(
                f"{self.path}: unreadable journal ({exc}); move it away to start the stack's bookkeeping afresh"
            ) from None
        if data.get("version") != JOURNAL_VERSION:
            raise JournalError(
                f"{self.path}: journal version {data.get('version')!r}, expected {JOURNAL_VERSION}"
            )
        self.nodes = {name: NodeRecord.from_dict(rec) for name, rec in data.get("nodes", {}).items()}
        self.sections = dict(data.get("sections") or {})

    def _save(self) -> None:
        data = {
            "version": JOURNAL_VERSION,
            "stack": self.stack,
            "nodes": {name: asdict(rec) for name, rec in sorted(self.nodes.items())},
        }
        if self.sections:
            data["sections"] = self.sections
        write_atomic(self.path, json.dumps(data, indent=2) + "\n")

    def record(self, node: str) -> NodeRecord:
        """A copy of the node's record (empty when unknown)."""
        with self._lock:
            rec = self.nodes.get(node)
            return NodeRecord.from_dict(asdict(rec)) if rec else NodeRecord()

    def is_done(self, node: str, stage: str) -> bool:
        with self._lock:
            rec = self.nodes.get(node)
            # A failure removes the failed stage and later ones from ``done``; earlier ones stand.
            return bool(rec and stage in rec.done)

    def observe(self, node: str, provider_id: str) -> bool:
        """Tie the node's record to the machine now behind it; reset it if the machine changed.

        Returns True when the record was reset (a replaced container must be redone from scratch).
        """
        with self._lock:
            rec = self.nodes.get(node)
            if rec is not None and rec.provider_id == provider_id:
                return False
            reset = rec is not None and bool(rec.provider_id)
            self.nodes[node] = NodeRecord(provider_id=provider_id, updated=now_iso())
            self._save()
            return reset

    def mark_done(self, node: str, stage: str, **fields: str) -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
        with self._lock:
            rec = self.nodes.setdefault(node, NodeRecord())
            # A stage being done means everything before it is done; later stages stay as they
            # were (a converged re-run of configure must not forget the certification).
            upto = STAGES.index(stage) + 1
            rec.done = [s for s in STAGES if s in STAGES[:upto] or s in rec.done]
            rec.failed_stage = ""
            rec.reason = ""
            for key, value in fields.items():
                setattr(rec, key, value)
            rec.updated = now_iso()
            self._save()

    def mark_failed(self, node: str, stage: str, reason: str, **fields: str) -> None:
        with self._lock:
            rec = self.nodes.setdefault(node, NodeRecord())
            if stage in STAGES:
                rec.done = [s for s in rec.done if STAGES.index(s) < STAGES.index(stage)]
            rec.failed_stage = stage
            rec.reason = reason
            for key, value in fields.items():
                setattr(rec, key, value)
            rec.updated = now_iso()
            self._save()

    def annotate(self, node: str, **fields: str) -> None:
        """Set fields of the node's record without changing what is done (e.g. ``certifying``)."""
        with self._lock:
            rec = self.nodes.setdefault(node, NodeRecord())
            for key, value in fields.items():
                setattr(rec, key, value)
            rec.updated = now_iso()
            self._save()

    def record_applied(self, node: str, applied: dict[str, Any]) -> None:
        """Keep what a converge applied to ``node`` (fingerprints, pinned versions)."""
        with self._lock:
            rec = self.nodes.setdefault(node, NodeRecord())
            rec.applied = applied
            rec.updated = now_iso()
            self._save()

    def section(self, name: str) -> Any:
        """A copy of a stack-wide record (None when absent)."""
        with self._lock:
            value = self.sections.get(name)
            return json.loads(json.dumps(value)) if value is not None else None

    def set_section(self, name: str, value: Any) -> None:
        with self._lock:
            self.sections[name] = value
            self._save()

    def append_to_section(self, name: str, item: Any, keep: Callable[[Any], bool] | None = None) -> None:
        """Append ``item`` to the list section ``name`` under one lock (threads may append at once);
        ``keep`` drops old entries that no longer pass it."""
        with self._lock:
            items = [i for i in self.sections.get(name) or [] if keep is None or keep(i)]
            items.append(item)
            self.sections[name] = items
            self._save()

    def record_certified(self, node: str, versions: dict[str, str], hardware: dict[str, Any]) -> None:
        """Keep the version set and machine identity a node was just certified with."""
        with self._lock:
            rec = self.nodes.setdefault(node, NodeRecord())
            rec.versions = dict(versions)
            rec.hardware = dict(hardware)
            rec.updated = now_iso()
            self._save()

    def record_drift(self, node: str, baseline: dict[str, Any]) -> None:
        """Keep the node's drift baseline (``{}``: none, so the next `up` converges it)."""
        with self._lock:
            rec = self.nodes.setdefault(node, NodeRecord())
            rec.drift = baseline
            rec.updated = now_iso()
            self._save()

    def invalidate(self, node: str, stage: str) -> None:
        """Forget ``stage`` and everything after it (e.g. ``--recertify``)."""
        with self._lock:
            rec = self.nodes.get(node)
            if rec is None:
                return
            rec.done = [s for s in rec.done if STAGES.index(s) < STAGES.index(stage)]
            rec.updated = now_iso()
            self._save()

    def forget(self, node: str | None = None) -> None:
        """Drop one node's record, or all of them (``down``)."""
        with self._lock:
            if node is None:
                self.nodes.clear()
                self.sections.clear()  # a destroyed stack has no rollout or hardware history
            else:
                self.nodes.pop(node, None)
            self._save()
