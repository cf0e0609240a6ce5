"""The project's own container-engine configuration.

On these machines podman only starts containers with runtime runc, the cgroupfs cgroup
manager, file events and lowered default ulimits (without them: "error setting rlimit ...
operation not permitted"). Rather than edit the machine's /etc/containers, the project writes
its own files and points podman at them with CONTAINERS_CONF / CONTAINERS_STORAGE_CONF.
Storage stays at podman's default place, so ``podman ps`` run by hand sees the same containers.
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterforge.spec.loader import REPO_ROOT

ENGINE_DIR_ENV = "CLUSTERFORGE_ENGINE_DIR"

CONTAINERS_CONF = """\
# Written by clusterforge (clusterforge/providers/local/config.py); rewritten on every run.
[containers]
# Lower than the host's: with the defaults, container start fails with
# "error setting rlimit ... operation not permitted" on these machines.
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"

[network]
# netavark + aardvark-dns: nodes resolve each other by name on the stack network.
network_backend = "netavark"
"""

STORAGE_CONF_ROOT = """\
# Written by clusterforge (clusterforge/providers/local/config.py); rewritten on every run.
[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
"""

# Rootless podman keeps its storage under the user's home; only the driver is pinned.
STORAGE_CONF_ROOTLESS = """\
# Written by clusterforge (clusterforge/providers/local/config.py); rewritten on every run.
[storage]
driver = "overlay"
"""


def engine_dir() -> Path:
    """Where the engine files live: ``$CLUSTERFORGE_ENGINE_DIR`` or ``.clusterforge/engine``."""
    override = os.environ.get(ENGINE_DIR_ENV)
    return Path(override) if override else REPO_ROOT / ".clusterforge" / "engine"


def _write_if_changed(path: Path, text: str) -> None:
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # atomic: a concurrent podman never reads half a file


def write_podman_config(directory: Path | None = None) -> dict[str, str]:
    """Write containers.conf and storage.conf; return the environment that selects them."""
    directory = directory or engine_dir()
    directory.mkdir(parents=True, exist_ok=True)
    containers_conf = directory / "containers.conf"
    storage_conf = directory / "storage.conf"
    _write_if_changed(containers_conf, CONTAINERS_CONF)
    _write_if_changed(storage_conf, STORAGE_CONF_ROOT if os.geteuid() == 0 else STORAGE_CONF_ROOTLESS)
    return {"CONTAINERS_CONF": str(containers_conf), "CONTAINERS_STORAGE_CONF": str(storage_conf)}


# Where scripts/setup.d/25-collections.sh puts the Ansible collections (containers.podman, ...):
# set ANSIBLE_COLLECTIONS_PATH to this for every Ansible run.
COLLECTIONS_PATH = REPO_ROOT / ".clusterforge" / "collections"
