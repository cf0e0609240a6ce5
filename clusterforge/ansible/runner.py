"""Run a playbook through ansible-runner: per-host progress, full log kept, failures extracted.

Each run gets its own folder ``<runs_dir>/<timestamp>-<name>/`` used as ansible-runner's
private data dir: the full text log is ``artifacts/<ident>/stdout`` and every event is kept in
``artifacts/<ident>/job_events/``. Known secret values (the munge key) are removed from each event
before ansible-runner writes it, and from the other artifacts once at the end, so the run folder
can be attached to a bug report; no event file is read back (work linear in events).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clusterforge.ansible.events import (
    HostProgress,
    ProgressModel,
    TaskFailure,
    redact,
    redact_event,
    secret_forms,
)
from clusterforge.ansible.scale import AnsibleScale
from clusterforge.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
# The project's connection plugins, on ANSIBLE_CONNECTION_PLUGINS (ansible_env below).
CONNECTION_PLUGINS = REPO_ROOT / "plugins" / "connection"
# containers.podman.podman with pipelining (plugins/connection/podman_pipelined.py): one podman
# exec per task instead of four. The local provider's nodes name it.
PODMAN_CONNECTION = "podman_pipelined"

OnUpdate = Callable[[HostProgress], None]
# The secret values to keep out of the artifacts, or a callable asked again while the run goes
# (the munge key is created by the run itself).
Secrets = Iterable[bytes] | Callable[[], Iterable[bytes]]


@dataclass
class PlaybookResult:
    playbook: str
    rc: int
    status: str  # ansible-runner status: successful | failed | canceled | timeout | error
    hosts: dict[str, HostProgress]
    failures: dict[str, TaskFailure]
    run_dir: Path
    log: Path
    stats: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def changed(self) -> int:
        return sum(h.changed for h in self.hosts.values())

    def host_ok(self, host: str) -> bool:
        """The host ran the play to its end: no failed task, reachable, and (when stats exist) processed."""
        if host in self.failures:
            return False
        if self.status in ("canceled", "timeout"):
            return False
        # No recap (ansible-playbook not found, crashed, interrupted): nothing is known to be done.
        return host in self.stats.get("processed", {})


def run_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def ansible_env(state_dir: Path, scale: AnsibleScale | None = None) -> dict[str, str]:
    """Environment for ansible-playbook: temp/home folders inside the stack's state, roles path,
    and with ``scale`` the fleet's forks, fact cache and SSH connection reuse (ansible/scale.py)."""
    home = state_dir / "ansible"
    # ansible-playbook lives next to the interpreter running us (the venv), which may not be on PATH.
    bindir = str(Path(sys.executable).parent)
    env = {
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_ROLES_PATH": str(REPO_ROOT / "roles"),
        "ANSIBLE_CONNECTION_PLUGINS": str(CONNECTION_PLUGINS),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_PIPELINING": "True",
    }
    if scale is not None:
        env.update(scale.env())
    # Keep a caller's explicit choices (tests set these to temp dirs).
    for key in ("ANSIBLE_HOME", "ANSIBLE_LOCAL_TEMP", "ANSIBLE_REMOTE_TMP", "ANSIBLE_COLLECTIONS_PATH"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    return env


# Every process of one run carries this in its environment, so that a cancelled run's leftovers
# can be found: ansible-runner kills ansible-playbook's process group, but Ansible's workers
# (one per host, started with setsid) are leaders of their own groups and survive it, still
# driving tasks on the nodes.
RUN_MARKER = "CLUSTERFORGE_ANSIBLE_RUN"


def _marked(marker: str) -> list[int]:
    want = f"{RUN_MARKER}={marker}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if want in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:  # gone, or not ours to read
            continue
    return pids


def reap(marker: str, grace_s: float = 3.0) -> list[int]:
    """Stop what is left of a cancelled run (TERM, then KILL after ``grace_s``); returns the pids."""
    pids = _marked(marker)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig == signal.SIGTERM:  # the grace period: wait for them to exit by themselves
            wait_until(lambda: _marked(marker), lambda left: not left, timeout_s=grace_s, poll_s=0.1)
        pids_left = _marked(marker)
        if not pids_left:
            break
        pids = pids_left
    return pids


# The runs of this process that have not ended yet, by marker (their run folder).
_ACTIVE: dict[str, PlaybookRun] = {}
_ACTIVE_LOCK = threading.Lock()


def active_runs() -> list[PlaybookRun]:
    with _ACTIVE_LOCK:
        return list(_ACTIVE.values())


def stop_active_runs(grace_s: float = 3.0) -> list[int]:
    """Cancel every unfinished playbook run of this process and stop its processes now.

    ansible-runner starts ansible-playbook through pexpect, in a session of its own (and with
    SIGHUP ignored), so neither a Ctrl-C in the terminal nor the end of this process reaches it:
    a command that stops for any reason calls this before it lets go of the stack's lock.
    Returns the pids that would not die."""
    left: list[int] = []
    for run in active_runs():
        run.cancel()
        left += reap(run.marker, grace_s)
    return left


class PlaybookRun:
    """One playbook run; ``cancel()`` may be called from another thread."""

    def __init__(
        self,
        playbook: Path,
        inventory: Path,
        runs_dir: Path,
        *,
        limit: Iterable[str] | None = None,
        extravars: dict[str, Any] | None = None,
        secrets: Secrets = (),
        on_update: OnUpdate | None = None,
        env: dict[str, str] | None = None,
        tags: str | None = None,
    ):
        self.playbook = playbook
        self.inventory = inventory
        self.limit = sorted(limit) if limit is not None else None
        self.extravars = extravars or {}
        self._secrets_source = secrets if callable(secrets) else None
        self.secrets = [] if callable(secrets) else list(secrets)
        self._refresh_secrets()
        self.on_update = on_update or (lambda _h: None)
        self.env = {"PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
        self.env.update(env or {})
        self.tags = tags
        self.run_dir = runs_dir / f"{run_stamp()}-{playbook.stem}"
        self._cancel = threading.Event()
        self.model = ProgressModel(self.limit or (), self.secrets)

    def _refresh_secrets(self) -> None:
        """Ask the secrets callable again (cheap: it reads one small file), keeping the forms."""
        if self._secrets_source is not None:
            fresh = [s for s in self._secrets_source() if s not in self.secrets]
            self.secrets += fresh
        self._forms = secret_forms(self.secrets)

    @property
    def marker(self) -> str:
        """The value of ``RUN_MARKER`` in the environment of every process of this run."""
        return str(self.run_dir)

    def cancel(self) -> None:
        self._cancel.set()

    def _event(self, event: dict[str, Any]) -> bool:
        # Until the secret exists (a run that creates the munge key), look for it again on each
        # event: one stat and read of a small file; once known, the forms stay.
        if self._secrets_source is not None and not self.secrets:
            self._refresh_secrets()
            if self.secrets:
                self.model.set_secrets(self.secrets)
        if self._forms:
            redact_event(event, self._forms)  # ansible-runner writes the event after this returns
        host = self.model.apply(event)
        if host is not None:
            self.on_update(self.model.hosts[host])
        return True  # keep the event in job_events

    def run(self) -> PlaybookResult:
        import ansible_runner  # heavy import: only when a playbook really runs

        self.run_dir.mkdir(parents=True, exist_ok=True)
        kwargs: dict[str, Any] = {
            "private_data_dir": str(self.run_dir),
            "playbook": str(self.playbook.resolve()),
            "inventory": str(self.inventory.resolve()),
            "ident": "run",
            "quiet": True,
            "envvars": self.env,
            "extravars": self.extravars,
            "event_handler": self._event,
            "cancel_callback": self._cancel.is_set,
            "project_dir": str(REPO_ROOT),
        }
        if self.limit is not None:
            kwargs["limit"] = ",".join(self.limit)
        if self.tags:
            kwargs["tags"] = self.tags
        kwargs["envvars"] = {**self.env, RUN_MARKER: self.marker}
        # ansible-runner points the fact cache into this run's artifacts (a cache that dies with
        # the run) unless it is given one: the stack's, from the environment (ansible/scale.py).
        if self.env.get("ANSIBLE_CACHE_PLUGIN_CONNECTION"):
            kwargs["fact_cache_type"] = "jsonfile"
            kwargs["fact_cache"] = self.env["ANSIBLE_CACHE_PLUGIN_CONNECTION"]
        with _ACTIVE_LOCK:
            _ACTIVE[self.marker] = self
        try:
            result = ansible_runner.run(**kwargs)
        except BaseException:
            # KeyboardInterrupt (or SIGTERM turned into one) inside ansible-runner's loop: it
            # neither kills its child nor waits for it, and the child is out of the signal's reach.
            self.cancel()
            reap(self.marker)
            raise
        finally:
            with _ACTIVE_LOCK:
                _ACTIVE.pop(self.marker, None)
        if result.status in ("canceled", "timeout"):
            reap(self.marker)
        artifacts = self.run_dir / "artifacts" / "run"
        self._refresh_secrets()  # the run may have created the secret at its very end
        self.scrub(artifacts, events=False)
        stats = result.stats or {}
        return PlaybookResult(
            playbook=self.playbook.name,
            rc=int(result.rc if result.rc is not None else -1),
            status=str(result.status),
            hosts=self.model.hosts,
            failures=self.model.failures,
            run_dir=self.run_dir,
            log=artifacts / "stdout",
            stats={k: dict(v) for k, v in stats.items() if isinstance(v, dict)},
        )

    def scrub(self, artifacts: Path, events: bool = True) -> None:
        """Remove the known secrets from the files under ``artifacts``. ``events=False`` leaves
        out job_events/, whose events were redacted as they came (``_event``): each file is then
        read at most once per run, whatever the number of events."""
        forms = secret_forms(self.secrets)
        if not forms or not artifacts.exists():
            return
        for path in artifacts.rglob("*"):
            if not path.is_file() or (not events and path.parent.name == "job_events"):
                continue
            try:
                text = path.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            clean = redact(text, forms)
            if clean != text:
                path.write_text(clean)
        # ansible-runner also writes the extravars and env it was given: nothing secret goes there.
