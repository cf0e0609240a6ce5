"""The node image: a Debian root filesystem made by debootstrap, imported into the engine.

No image registry is reachable from these machines, so the image is built from the Debian
archive the machine already uses. The tag carries a hash of everything that shapes the image
(package list, suite, mirrors, recipe version): change any of them and the next ``create``
builds a new image; otherwise the existing one is reused.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterforge.providers.base import ProviderError
from clusterforge.providers.local import config
from clusterforge.providers.local.engine import Engine

# Bump when the build steps below change the image (the files it writes are hashed anyway).
RECIPE_VERSION = 3

# The periodic jobs of Debian's base packages, masked on container nodes: a node's CPU share is its
# accelerator, and a job that wakes during a certification (apt-daily's `apt-get update` fetches and
# parses the archive's lists: seconds of CPU on a 0.5-CPU share) takes that share from the burn-in,
# whose figure is then judged against a baseline measured without it. CI of 2026-12-05 drained a
# healthy node re-certified alone at 39 % under its baseline (cause unproven; these timers fire at
# random times within 12 h). A real GPU node's burn-in runs on the GPU, where they cost nothing.
MASKED_TIMERS: tuple[str, ...] = (
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
    "man-db.timer",
    "logrotate.timer",
    "systemd-tmpfiles-clean.timer",
)

# What every node needs before the roles run: systemd as PID 1 (systemd, systemd-sysv, dbus),
# Ansible's Python and apt modules (python3, python3-apt; python3-debian for deb822_repository),
# and the basic tools roles and validators call. The roles install Slurm, munge, NVIDIA etc.
PACKAGES: tuple[str, ...] = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "python3",
    "python3-apt",
    "python3-debian",
    "procps",
    "iproute2",
    "iputils-ping",
    "ca-certificates",
    "gnupg",
    "curl",
    "sudo",
    "less",
    "kmod",
)

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
APT_SOURCES_DIR = Path("/etc/apt")
IMAGE_SIZE_BYTES = 1 << 30  # free space the build needs: rootfs (~350 MB) + the imported layer


@dataclass(frozen=True)
class Mirrors:
    main: str
    security: str


def _deb822_entries(text: str) -> Iterable[dict[str, str]]:
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        if fields.get("enabled", "yes").lower() != "no" and fields:
            yield fields


def _one_line_entries(text: str) -> Iterable[dict[str, str]]:
    for raw in text.splitlines():
        parts = raw.split("#", 1)[0].split()
        if len(parts) < 3 or parts[0] != "deb":
            continue
        if parts[1].startswith("["):  # options: "[arch=amd64 signed-by=...]", possibly several words
            while parts and not parts[1].endswith("]"):
                parts.pop(1)
            parts.pop(1)
        if len(parts) >= 3:
            yield {"types": "deb", "uris": parts[1], "suites": parts[2], "components": " ".join(parts[3:])}


def parse_apt_sources(files: dict[str, str], suite: str) -> Mirrors:
    """Find the Debian mirrors (``suite`` main, ``suite``-security) in apt source files.

    ``files`` maps a file name to its text; ``*.sources`` are deb822, others one-line format.
    Falls back to deb.debian.org for what is not found.
    """
    main = security = ""
    for name in sorted(files):
        entries = (
            _deb822_entries(files[name]) if name.endswith(".sources") else _one_line_entries(files[name])
        )
        for entry in entries:
            if "deb" not in entry.get("types", "").split():
                continue
            suites = entry.get("suites", "").split()
            uris = [u for u in entry.get("uris", "").split() if u.startswith(("http://", "https://"))]
            if not uris or "main" not in entry.get("components", "").split():
                continue
            if suite in suites and not main:
                main = uris[0].rstrip("/")
            if f"{suite}-security" in suites and not security:
                security = uris[0].rstrip("/")
    return Mirrors(main or DEFAULT_MIRROR, security or DEFAULT_SECURITY_MIRROR)


def machine_mirrors(suite: str, apt_dir: Path = APT_SOURCES_DIR) -> Mirrors:
    files: dict[str, str] = {}
    candidates = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*"))]
    for path in candidates:
        if path.is_file() and path.suffix in (".list", ".sources"):
            files[path.name] = path.read_text(errors="replace")
    return parse_apt_sources(files, suite)


def image_sources(mirrors: Mirrors, suite: str) -> str:
    """The node's apt sources: all components (the roles take the NVIDIA userland from non-free)."""
    components = "main contrib non-free non-free-firmware"
    return (
        f"Types: deb\nURIs: {mirrors.main}\nSuites: {suite} {suite}-updates\nComponents: {components}\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        f"Types: deb\nURIs: {mirrors.security}\nSuites: {suite}-security\nComponents: {components}\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )


# A .deb is downloaded once per machine, not once per node. Each node keeps its own
# /var/cache/apt/archives (apt locks that folder: shared between nodes, a second node's apt-get
# fails at once with "Could not get lock /var/cache/apt/archives/lock"). The machine-wide cache
# volume is mounted at SHARED_APT_CACHE; apt hooks move each newly downloaded .deb there (temp name,
# then rename: no node sees half a file) and put symlinks to every cached .deb into the node's own
# archive folder, where apt takes them as already downloaded. Without the volume the hooks do nothing.
SHARED_APT_CACHE = "/var/cache/clusterforge/apt-archives"

APT_CACHE_SCRIPT = f"""#!/bin/sh
# clusterforge: share downloaded .debs between the container nodes of this machine (see
# clusterforge/providers/local/image.py). "link": symlink every shared .deb into apt's archive folder;
# "publish": move newly downloaded .debs to the shared cache and leave symlinks. Never fails apt.
SHARED={SHARED_APT_CACHE}
ARCHIVES=/var/cache/apt/archives
[ -d "$SHARED" ] && [ -w "$SHARED" ] || exit 0
case "$1" in
link)
  for f in "$SHARED"/*.deb; do
    [ -e "$f" ] || continue
    t="$ARCHIVES/${{f##*/}}"
    [ -e "$t" ] || [ -L "$t" ] || ln -s "$f" "$t"
  done ;;
publish)
  for f in "$ARCHIVES"/*.deb; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    name=${{f##*/}}
    if [ ! -e "$SHARED/$name" ]; then
      tmp="$SHARED/.$name.$(hostname).$$"
      if ! {{ cp "$f" "$tmp" && mv -f "$tmp" "$SHARED/$name"; }}; then rm -f "$tmp"; continue; fi
    fi
    ln -sf "$SHARED/$name" "$f"
  done ;;
esac
exit 0
"""

APT_CACHE_SCRIPT_PATH = "usr/local/sbin/clusterforge-apt-cache"

APT_CONF = f"""// clusterforge: share downloaded .debs between the nodes of this machine (see {APT_CACHE_SCRIPT_PATH})
Binary::apt::APT::Keep-Downloaded-Packages "true";
// Translations are a third of `apt-get update` and nothing on a node reads them.
Acquire::Languages "none";
APT::Keep-Downloaded-Packages "true";
APT::Update::Post-Invoke {{ "/{APT_CACHE_SCRIPT_PATH} link"; }};
DPkg::Pre-Invoke {{ "/{APT_CACHE_SCRIPT_PATH} publish"; }};
DPkg::Post-Invoke {{ "/{APT_CACHE_SCRIPT_PATH} link"; }};
"""


def image_tag(engine_name: str, suite: str, mirrors: Mirrors, packages: Iterable[str] = PACKAGES) -> str:
    # The files written into the image are part of the recipe: editing them rebuilds the image.
    written = [APT_CONF, APT_CACHE_SCRIPT, image_sources(mirrors, suite)]
    recipe = "\n".join(
        [str(RECIPE_VERSION), suite, mirrors.main, mirrors.security, *written, *MASKED_TIMERS]
        + sorted(set(packages))
    )
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    repo = "localhost/clusterforge-node" if engine_name == "podman" else "clusterforge-node"
    return f"{repo}:{suite}-{digest}"


def _customise(root: Path, mirrors: Mirrors, suite: str) -> None:
    """Make the debootstrapped tree a good container image for systemd nodes."""
    apt = root / "etc/apt"
    (apt / "sources.list").unlink(missing_ok=True)
    (apt / "sources.list.d").mkdir(exist_ok=True)
    (apt / "sources.list.d/debian.sources").write_text(image_sources(mirrors, suite))
    (apt / "apt.conf.d/90clusterforge-apt-cache").write_text(APT_CONF)
    script = root / APT_CACHE_SCRIPT_PATH
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(APT_CACHE_SCRIPT)
    script.chmod(0o755)
    # Each container must get its own machine id (journald, dbus): systemd makes one at boot
    # when the file is empty.
    (root / "etc/machine-id").write_text("")
    (root / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    (root / "etc/hostname").unlink(missing_ok=True)  # the engine sets the hostname
    units = root / "etc/systemd/system"
    units.mkdir(parents=True, exist_ok=True)
    for timer in MASKED_TIMERS:  # masked as `systemctl mask` does; also those a role installs later
        (units / timer).unlink(missing_ok=True)
        (units / timer).symlink_to("/dev/null")
    # Package lists and debootstrap's .debs are stale the day after: the roles run apt update.
    lists = root / "var/lib/apt/lists"
    for stale in lists.glob("*"):
        if stale.is_file():
            stale.unlink()
    # Ansible's apt module takes the lists folder's mtime as "last update" when there is no
    # update-success-stamp: a fresh mtime made `update_cache: true, cache_valid_time: N` skip
    # the update for N seconds after a build, on a node that has no lists at all.
    (root / "var/lib/apt/periodic/update-success-stamp").unlink(missing_ok=True)
    os.utime(lists, (0, 0))
    for stale in (root / "var/cache/apt").rglob("*"):
        if stale.is_file() and (stale.suffix in (".deb", ".bin")):
            stale.unlink()


def _run(argv: list[str], log: Path, **kwargs: Any) -> None:
    with log.open("ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, **kwargs)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise ProviderError(f"`{' '.join(argv[:3])} …` failed (exit {proc.returncode}); log {log}:\n{tail}")


def build_rootfs(root: Path, suite: str, mirrors: Mirrors, packages: Iterable[str], log: Path) -> None:
    debootstrap = shutil.which("debootstrap")
    if not debootstrap:
        raise ProviderError("debootstrap is not installed: apt-get install debootstrap")
    cache = config.engine_dir() / "debootstrap-cache"  # keeps .debs: a rebuild downloads only what changed
    cache.mkdir(parents=True, exist_ok=True)
    argv = [
        debootstrap,
        "--variant=minbase",
        f"--cache-dir={cache.resolve()}",
        f"--include={','.join(sorted(set(packages)))}",
        suite,
        str(root),
        mirrors.main,
    ]
    _run(argv, log)
    _customise(root, mirrors, suite)


def import_rootfs(engine: Engine, root: Path, tag: str, log: Path) -> None:
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", str(root), "-c", "."],
        stdout=subprocess.PIPE,
    )
    try:
        engine.run(
            "import",
            "--change",
            'CMD ["/sbin/init"]',
            "--change",
            "STOPSIGNAL SIGRTMIN+3",
            "--message",
            "clusterforge node image",
            "-",
            tag,
            stdin=tar.stdout,
        )
    finally:
        if tar.stdout:
            tar.stdout.close()
        tar.wait()
    if tar.returncode != 0:
        raise ProviderError(f"tar of {root} failed (exit {tar.returncode}); see {log}")


def ensure_image(
    engine: Engine,
    suite: str = "bookworm",
    packages: Iterable[str] = PACKAGES,
    log_dir: Path | None = None,
) -> tuple[str, bool]:
    """Return (tag, built): build the node image unless an image with its tag already exists.

    A lock file serialises builds on this machine: two test sessions starting at once build once.
    """
    packages = tuple(packages)
    mirrors = machine_mirrors(suite)
    tag = image_tag(engine.name, suite, mirrors, packages)
    if engine.image_exists(tag):
        return tag, False
    log_dir = log_dir or config.engine_dir()
    log_dir.mkdir(parents=True, exist_ok=True)
    lock_path = Path(tempfile.gettempdir()) / f"clusterforge-image-{tag.rsplit(':', 1)[1]}.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if engine.image_exists(tag):  # built by whoever held the lock before us
            return tag, False
        log = log_dir / f"image-{tag.rsplit(':', 1)[1]}.log"
        log.write_text(
            f"# clusterforge node image {tag}, started {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
        )
        work = Path(tempfile.mkdtemp(prefix="clusterforge-rootfs-", dir="/var/tmp"))
        try:
            build_rootfs(work / "root", suite, mirrors, packages, log)
            import_rootfs(engine, work / "root", tag, log)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return tag, True


def prune_images(engine: Engine, keep: str) -> list[str]:
    """Remove node images other than ``keep`` that no container uses; return the removed tags.

    Not done after every build on purpose: a session still running older code may be about to
    start containers from its image.
    """
    repo = keep.rsplit(":", 1)[0]
    listed = engine.run(
        "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "--filter", f"reference={repo}"
    ).stdout
    removed = []
    for tag in sorted(set(listed.split()) - {keep}):
        if engine.run("rmi", tag, check=False).returncode == 0:  # refused while a container uses it
            removed.append(tag)
    return removed
