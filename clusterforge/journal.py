"""Per-stack journal: what `up` has finished for each node, so a second run resumes.

Lives in ``.clusterforge/<stack>/`` as two files:

- ``journal.json``: a snapshot (every node's record and the stack-wide sections), replaced only
  by compaction: written to a temporary file, fsynced, renamed over the old one (atomic on POSIX)
  and the folder fsynced, so a reader sees the old snapshot or the new one, never half of one.
- ``journal.log``: one JSON line per change since that snapshot, appended (never rewritten): the
  fields a change set on one node, a section's new value, or a node forgotten. Its first line
  names the snapshot generation it follows; a log of another generation (a crash between the
  snapshot's rename and the log's reset) is already inside the snapshot and is ignored.

Why an append-only log beside a snapshot rather than SQLite in WAL mode or a file per node: the
journal is also what the state backend carries to other machines (clusterforge/state), so it
must be plain files that are complete once written (SQLite's WAL needs shared memory on one host
and "does not work over a network filesystem", the static stacks' shared state path), and one
change costs one short append, where rewriting the whole journal per event made a 4,096-node
`up` quadratic (issue 24: ~41,500 s). A file per node would still rewrite a node's whole record
(drift baseline and applied fingerprints, ~12 KB) per event and leave thousands of files to
carry. Loading reads the snapshot and replays the log: linear in their size. Compaction runs
when the log has grown past the snapshot's size (and 4 MiB), so its cost is paid back by the
appends that caused it: linear overall.

Durability: every append is written at once (a killed process loses nothing); fsync runs at most
once a second and on compaction, so a power cut loses at most the last second of progress,
which `up` redoes (its stages are idempotent). A torn last line (a crash mid-append) is dropped
on load; any other unreadable line is an error naming the file and line.

Appends and compaction hold an ``flock`` on ``journal.lock`` too, so that a second Journal object
on the same stack (several parts of one command open their own) never loses an append to a
compaction: compaction rebuilds the snapshot from the files, not from its own memory.

A node's entry is only trusted while it describes the same machine: when the provider reports
another ``provider_id`` (the container or instance was replaced), the entry is reset.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

JOURNAL_VERSION = 1
STATE_ROOT_ENV = "CLUSTERFORGE_STATE_DIR"
LOG_KIND = "clusterforge-journal-log"
COMPACT_MIN_BYTES = 4 << 20  # the log is compacted once past the snapshot's size and this
FSYNC_INTERVAL_S = 1.0

# Stages in the order a node passes them. "failed" is not a stage: it is recorded with the
# stage that failed, so a re-run knows where to start again.
STAGES = ("provisioned", "configured", "certified")


REPO_ROOT = Path(__file__).resolve().parents[1]

# Set by clusterforge.state while a command works on a private copy of a stack's state (a
# read-only command pulling from a remote backend); None: the environment or the repository.
_root_override: Path | None = None


def state_root() -> Path:
    """Where per-stack state lives: ``$CLUSTERFORGE_STATE_DIR`` or ``<repo>/.clusterforge``."""
    if _root_override is not None:
        return _root_override
    return Path(os.environ.get(STATE_ROOT_ENV) or REPO_ROOT / ".clusterforge").resolve()


@contextmanager
def state_root_at(root: Path) -> Iterator[Path]:
    """Read every stack's state under ``root`` for the body (a private copy of the state)."""
    global _root_override
    before, _root_override = _root_override, root.resolve()
    try:
        yield _root_override
    finally:
        _root_override = before


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
    write_atomic_bytes(path, text.encode())


def write_atomic_bytes(path: Path, data: bytes, mode: int | None = None, sync_dir: bool = True) -> None:
    """``write_atomic`` for bytes: a temporary file in the same folder, fsynced, renamed over
    ``path``, then the folder fsynced (``sync_dir``) so that the rename itself survives a crash.
    ``mode``: the file's permissions (default: the temporary file's 0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if not sync_dir:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class JournalError(Exception):
    pass


@dataclass
class _Files:
    """What the journal's files hold, read whole (for loading and for compaction)."""

    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)
    generation: int = 0
    snapshot_bytes: int = 0
    log_bytes: int = 0


class Journal:
    """Thread-safe per-node progress of one stack, persisted on every change (one appended line)."""

    def __init__(self, stack: str, root: Path | None = None):
        self.stack = stack
        self.dir = (root or state_root()) / stack
        self.path = self.dir / "journal.json"
        self.log_path = self.dir / "journal.log"
        self._lock_path = self.dir / "journal.lock"
        self._lock = threading.Lock()
        self.nodes: dict[str, NodeRecord] = {}
        # Stack-wide records beside the nodes' (e.g. "rollout", "replacements", "failed_gpus").
        self.sections: dict[str, Any] = {}
        self._last_fsync = 0.0
        self._log_ino = -1  # the log file this object has checked (its inode)
        if self.path.exists() or self.log_path.exists():
            with self._files_locked():  # another object's compaction never falls between the two reads
                files = self._read_files()
        else:
            files = _Files()  # nothing yet (and nothing is created by looking)
        self.nodes, self.sections = files.nodes, files.sections

    # --- files -------------------------------------------------------------------------------

    def _read_files(self) -> _Files:
        out = _Files()
        if self.path.exists():
            try:
                text = self.path.read_text()
                data = json.loads(text)
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise JournalError(
                    f"{self.path}: unreadable journal ({exc}); move it away to start the stack's bookkeeping afresh"
                ) from None
            if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
                version = data.get("version") if isinstance(data, dict) else None
                raise JournalError(f"{self.path}: journal version {version!r}, expected {JOURNAL_VERSION}")
            out.nodes = {n: NodeRecord.from_dict(r) for n, r in (data.get("nodes") or {}).items()}
            out.sections = dict(data.get("sections") or {})
            out.generation = int(data.get("generation") or 0)
            out.snapshot_bytes = len(text)
        self._replay(out)
        return out

    def _replay(self, out: _Files) -> None:
        try:
            raw = self.log_path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self.log_path}: unreadable journal log ({exc.strerror})") from None
        out.log_bytes = len(raw)
        lines = raw.split(b"\n")
        if lines and lines[-1] == b"" or lines:
            lines.pop()
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict):
                    raise ValueError("not a JSON object")
            except (UnicodeDecodeError, ValueError) as exc:
                raise JournalError(
                    f"{self.log_path}:{number}: unreadable journal line ({exc}); move journal.log away "
                    "to fall back to the last snapshot (journal.json)"
                ) from None
            if number == 1:
                if entry.get("kind") != LOG_KIND:
                    raise JournalError(f"{self.log_path}:1: not a clusterforge journal log ({line[:80]!r})")
                if entry.get("generation") != out.generation:
                    return  # a log the snapshot already holds (compaction stopped before its reset)
                continue
            _apply(out.nodes, out.sections, entry)

    @contextmanager
    def _files_locked(self) -> Iterator[None]:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock

    def _append(self, entry: dict[str, Any]) -> None:
        """Persist one change: one line appended (the caller holds ``self._lock``)."""
        line = (json.dumps(entry, separators=(",", ":")) + "\n").encode()
        with self._files_locked():
            size = self._prepare_log()
            fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, line)
                now = time.monotonic()
                if now - self._last_fsync >= FSYNC_INTERVAL_S:
                    os.fsync(fd)
                    self._last_fsync = now
            finally:
                os.close(fd)
            if size + len(line) > max(COMPACT_MIN_BYTES, self._snapshot_size()):
                self._compact_locked()

    def _prepare_log(self) -> int:
        """Make the log ready for an append and return its size (the caller holds the files' lock).

        A log this object has not checked yet (new, or replaced by a compaction) must follow the
        snapshot's generation, else it is started afresh; a torn last line is cut off."""
        try:
            st = os.stat(self.log_path)
        except FileNotFoundError:
            st = None
        if st is None or st.st_ino != self._log_ino:
            generation = self._snapshot_generation()
            if st is None or self._log_generation() != generation:
                self._reset_log(generation)
            st = os.stat(self.log_path)
            self._log_ino = st.st_ino
        size = st.st_size
        with open(self.log_path, "rb") as handle:
            handle.seek(max(0, size - 1))
            if size and handle.read(1) != b"\n":
                size = self._cut_torn_tail(handle, size)
        return size

    def _cut_torn_tail(self, handle: Any, size: int) -> int:
        """Truncate the log after its last complete line (a crash cut the last append short)."""
        end, chunk = size, 65536
        while end > 0:
            start = max(0, end - chunk)
            handle.seek(start)
            at = handle.read(end - start).rfind(b"\n")
            if at >= 0:
                os.truncate(self.log_path, start + at + 1)
                return start + at + 1
            end = start
        os.truncate(self.log_path, 0)
        return 0

    def _log_generation(self) -> int | None:
        try:
            with open(self.log_path, "rb") as handle:
                head = json.loads(handle.readline())
        except (OSError, ValueError):
            return None
        if not isinstance(head, dict) or head.get("kind") != LOG_KIND:
            return None
        generation = head.get("generation")
        return generation if isinstance(generation, int) else None

    def _snapshot_size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def _snapshot_generation(self) -> int:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:
            raise JournalError(f"{self.path}: unreadable journal ({exc})") from None
        return int(data.get("generation") or 0) if isinstance(data, dict) else 0

    def _reset_log(self, generation: int) -> None:
        write_atomic(self.log_path, json.dumps({"kind": LOG_KIND, "generation": generation}) + "\n")
        self._log_ino = os.stat(self.log_path).st_ino

    def _compact_locked(self) -> None:
        """Fold the log into a new snapshot (read from the files: every writer's appends count)."""
        files = self._read_files()
        generation = files.generation + 1
        data: dict[str, Any] = {
            "version": JOURNAL_VERSION,
            "stack": self.stack,
            "generation": generation,
            "nodes": {name: vars(rec) for name, rec in sorted(files.nodes.items())},  # asdict: 10x slower
        }
        if files.sections:
            data["sections"] = files.sections
        write_atomic(self.path, json.dumps(data, separators=(",", ":")) + "\n")
        self._reset_log(generation)  # a crash before this leaves a log of the old generation: ignored
        self._last_fsync = time.monotonic()

    def compact(self) -> None:
        """Fold the log into the snapshot now (before the state is carried to a backend)."""
        with self._lock, self._files_locked():
            if self.path.exists() or self.log_path.exists():
                self._compact_locked()

    # --- reading -----------------------------------------------------------------------------

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

    def section(self, name: str) -> Any:
        """A copy of a stack-wide record (None when absent)."""
        with self._lock:
            value = self.sections.get(name)
            return json.loads(json.dumps(value)) if value is not None else None

    # --- changing ----------------------------------------------------------------------------

    def _set(self, node: str, fields: dict[str, Any], *, reset: bool = False) -> None:
        """Apply ``fields`` to the node's record in memory and append them (caller holds the lock)."""
        entry: dict[str, Any] = {"node": node, "set": fields}
        if reset:
            entry["reset"] = True
        _apply(self.nodes, self.sections, entry)
        self._append(entry)

    def observe(self, node: str, provider_id: str) -> bool:
        """Tie the node's record to the machine now behind it; reset it if the machine changed.

        Returns True when the record was reset (a replaced container must be redone from scratch).
        """
        with self._lock:
            rec = self.nodes.get(node)
            if rec is not None and rec.provider_id == provider_id:
                return False
            reset = rec is not None and bool(rec.provider_id)
            self._set(node, {"provider_id": provider_id, "updated": now_iso()}, reset=True)
            return reset

    def mark_done(self, node: str, stage: str, **fields: str) -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
        _check_fields(fields)
        with self._lock:
            rec = self.nodes.get(node) or NodeRecord()
            # A stage being done means everything before it is done; later stages stay as they
            # were (a converged re-run of configure must not forget the certification).
            upto = STAGES.index(stage) + 1
            done = [s for s in STAGES if s in STAGES[:upto] or s in rec.done]
            self._set(node, {"done": done, "failed_stage": "", "reason": "", **fields, "updated": now_iso()})

    def mark_failed(self, node: str, stage: str, reason: str, **fields: str) -> None:
        _check_fields(fields)
        with self._lock:
            rec = self.nodes.get(node) or NodeRecord()
            done = rec.done
            if stage in STAGES:
                done = [s for s in rec.done if STAGES.index(s) < STAGES.index(stage)]
            changes = {"done": done, "failed_stage": stage, "reason": reason, **fields}
            self._set(node, {**changes, "updated": now_iso()})

    def annotate(self, node: str, **fields: str) -> None:
        """Set fields of the node's record without changing what is done (e.g. ``certifying``)."""
        _check_fields(fields)
        with self._lock:
            self._set(node, {**fields, "updated": now_iso()})

    def record_applied(self, node: str, applied: dict[str, Any]) -> None:
        """Keep what a converge applied to ``node`` (fingerprints, pinned versions)."""
        with self._lock:
            self._set(node, {"applied": applied, "updated": now_iso()})

    def set_section(self, name: str, value: Any) -> None:
        with self._lock:
            entry = {"section": name, "value": value}
            _apply(self.nodes, self.sections, entry)
            self._append(entry)

    def append_to_section(self, name: str, item: Any, keep: Callable[[Any], bool] | None = None) -> None:
        """Append ``item`` to the list section ``name`` under one lock (threads may append at once);
        ``keep`` drops old entries that no longer pass it. Items are appended in time order, so the
        first is the oldest: when it still passes ``keep`` the append is one short log line."""
        with self._lock:
            items = self.sections.get(name)
            items = items if isinstance(items, list) else []
            if keep is not None and items and not keep(items[0]):
                # the oldest entry has expired: the kept ones are written once (rare: amortised)
                entry: dict[str, Any] = {"section": name, "value": [i for i in items if keep(i)] + [item]}
            else:
                entry = {"append": name, "item": item}  # one short line, whatever the section's length
            _apply(self.nodes, self.sections, entry)
            self._append(entry)

    def record_certified(self, node: str, versions: dict[str, str], hardware: dict[str, Any]) -> None:
        """Keep the version set and machine identity a node was just certified with."""
        with self._lock:
            self._set(node, {"versions": dict(versions), "hardware": dict(hardware), "updated": now_iso()})

    def record_drift(self, node: str, baseline: dict[str, Any]) -> None:
        """Keep the node's drift baseline (``{}``: none, so the next `up` converges it)."""
        with self._lock:
            self._set(node, {"drift": baseline, "updated": now_iso()})

    def invalidate(self, node: str, stage: str) -> None:
        """Forget ``stage`` and everything after it (e.g. ``--recertify``)."""
        with self._lock:
            rec = self.nodes.get(node)
            if rec is None:
                return
            done = [s for s in rec.done if STAGES.index(s) < STAGES.index(stage)]
            self._set(node, {"done": done, "updated": now_iso()})

    def forget(self, node: str | None = None) -> None:
        """Drop one node's record, or all of them (``down``)."""
        with self._lock:
            entry = {"forget": node}
            _apply(self.nodes, self.sections, entry)
            self._append(entry)
            if node is None:  # nothing of the stack is left to keep: start the files afresh
                with self._files_locked():
                    self._compact_locked()


def journal_files(folder: Path) -> dict[str, bytes]:
    """The journal's files in a stack folder as they are now, read together under the journal's
    lock (so that a compaction never falls between them): what the state backend carries."""
    if not folder.is_dir():
        return {}
    fd = os.open(folder / "journal.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        out = {}
        for name in ("journal.json", "journal.log"):
            with suppress(FileNotFoundError):
                out[name] = (folder / name).read_bytes()
        return out
    finally:
        os.close(fd)


def _check_fields(fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - set(NodeRecord.__dataclass_fields__))
    if unknown:
        raise TypeError(f"unknown journal field(s): {', '.join(unknown)}")


def _apply(nodes: dict[str, NodeRecord], sections: dict[str, Any], entry: dict[str, Any]) -> None:
    """One log line's change, applied to the records (the same code on writing and on replay)."""
    if "section" in entry:
        sections[str(entry["section"])] = entry.get("value")
    elif "append" in entry:
        current = sections.get(str(entry["append"]))
        sections[str(entry["append"])] = [*(current if isinstance(current, list) else []), entry.get("item")]
    elif "forget" in entry:
        if entry["forget"] is None:
            nodes.clear()
            sections.clear()  # a destroyed stack has no rollout or hardware history
        else:
            nodes.pop(str(entry["forget"]), None)
    elif "node" in entry:
        name = str(entry["node"])
        fields = entry.get("set") or {}
        if entry.get("reset") or name not in nodes:
            nodes[name] = NodeRecord.from_dict(fields)
            return
        rec = nodes[name]
        for key, value in fields.items():
            if key in NodeRecord.__dataclass_fields__:
                setattr(rec, key, value)
