"""How ansible-playbook is sized for the fleet: forks, fact caching, reused SSH connections.

Ansible's defaults are made for a handful of hosts: 5 forks (4,096 nodes are about 820 waves of
five per task), facts gathered again by every play that asks, one SSH connection per task. Here:

- **forks** from the workstation's CPUs: a fork mostly waits on its node (a round trip over SSH or
  SSM), so several per CPU keep the CPUs busy; bounded by the spec's ``ansible.max_forks`` (each
  fork is a Python process of some tens of MB). Ansible itself never starts more workers than the
  play has hosts.
- **facts** gathered ``smart``: once per host and kept in a jsonfile cache under the stack's state
  (``<state>/<stack>/ansible/facts``), so site.yml's cluster plays and later runs do not gather
  again. A machine that is new to the stack (first converge, replaced) has its entry dropped
  (``forget_facts``) before it converges, so facts never outlive the machine they describe.
- **SSH** connections kept open between tasks (ControlMaster/ControlPersist): one handshake per
  host per run instead of one per task. The SSM connection (amazon.aws.aws_ssm) starts a session
  per task and has no way to keep one (amazon.aws issue 2643, open): nothing to set for it here.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# A fork waits on the network far longer than it computes: this many per workstation CPU.
FORKS_PER_CPU = 16
# Never fewer than this (Ansible's own default is 5): small workstations still drive a fleet.
MIN_FORKS = 10
# How long an SSH master connection outlives its last task; longer than Ansible's 60 s default so
# that a run's next play (or the certify run after configure) still finds it.
CONTROL_PERSIST_S = 300
# A Unix socket path has at most 108 bytes (sun_path, with its NUL); Ansible names the socket with a
# 10-character hash inside its control path folder, and ssh first binds a temporary
# "<path>.<16 random characters>" (OpenSSH mux.c) before renaming it: folder + 28 must stay under 108.
# A folder longer than this moves to /tmp. (90 failed in CI: an 83-character pytest folder + 28 = 111.)
_MAX_CONTROL_DIR = 64


@dataclass(frozen=True)
class AnsibleScale:
    """The settings one stack's playbook runs get (``env()`` for ansible-playbook)."""

    forks: int
    fact_cache: Path
    fact_cache_timeout_s: int
    control_path_dir: Path

    def env(self) -> dict[str, str]:
        return {
            "ANSIBLE_FORKS": str(self.forks),
            "ANSIBLE_GATHERING": "smart",
            "ANSIBLE_CACHE_PLUGIN": "jsonfile",
            # ansible-runner replaces this with a folder inside each run's artifacts (a cache that
            # never outlives the run); PlaybookRun hands it over as ansible-runner's fact_cache.
            "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(self.fact_cache),
            "ANSIBLE_CACHE_PLUGIN_TIMEOUT": str(self.fact_cache_timeout_s),
            # Ansible's own default ssh_args plus a longer persistence and keep-alives (a master
            # connection that dies quietly would hang the next task instead of failing it).
            "ANSIBLE_SSH_ARGS": (
                f"-C -o ControlMaster=auto -o ControlPersist={CONTROL_PERSIST_S}s "
                "-o ServerAliveInterval=30 -o ServerAliveCountMax=4"
            ),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.control_path_dir),
        }


def workstation_cpus() -> int:
    """CPUs this process may run on (a container's or cgroup's share, not the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def forks_for(cpus: int, max_forks: int, forks: int | None = None) -> int:
    """Forks for a run: ``forks`` when the spec sets it, else FORKS_PER_CPU per CPU (at least
    MIN_FORKS); never above ``max_forks``."""
    wanted = forks if forks is not None else max(MIN_FORKS, FORKS_PER_CPU * cpus)
    return max(1, min(wanted, max_forks))


def control_path_dir(ansible_home: Path) -> Path:
    """Where SSH master sockets live: under the stack's Ansible home when the path is short
    enough for a socket, else a per-stack folder under /tmp."""
    preferred = ansible_home / "cp"
    if len(str(preferred)) <= _MAX_CONTROL_DIR:
        return preferred
    tag = hashlib.sha256(str(ansible_home).encode()).hexdigest()[:12]
    return Path("/tmp") / f"clusterforge-cp-{tag}"


def fact_cache_dir(state_dir: Path) -> Path:
    return state_dir / "ansible" / "facts"


def scale_for(
    state_dir: Path,
    *,
    max_forks: int,
    forks: int | None = None,
    fact_cache_timeout_s: int = 86400,
    cpus: int | None = None,
) -> AnsibleScale:
    """The settings for the stack whose state folder is ``state_dir`` (``<state>/<stack>``)."""
    return AnsibleScale(
        forks=forks_for(cpus or workstation_cpus(), max_forks, forks),
        fact_cache=fact_cache_dir(state_dir),
        fact_cache_timeout_s=fact_cache_timeout_s,
        control_path_dir=control_path_dir(state_dir / "ansible"),
    )


# ansible-core 2.19 names a host's cache file ``s<schema>_<host>`` (its persistence schema id;
# ansible/_internal/_plugins/_cache.py), older releases ``<host>`` (no prefix set here).
_CACHE_FILE = re.compile(r"^(?:s\d+_)?(?P<host>.+)$")


def forget_facts(state_dir: Path, hosts: Iterable[str]) -> list[str]:
    """Drop the cached facts of ``hosts`` (machines new to the stack); returns those dropped."""
    folder = fact_cache_dir(state_dir)
    wanted = set(hosts)
    if not wanted or not folder.is_dir():
        return []
    dropped = set()
    for path in folder.iterdir():
        match = _CACHE_FILE.match(path.name)
        for host in {path.name, match.group("host") if match else path.name} & wanted:
            path.unlink(missing_ok=True)
            dropped.add(host)
    return sorted(dropped)
