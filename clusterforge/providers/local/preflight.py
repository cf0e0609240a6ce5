"""Everything that would stop the local provider, found before anything is created.

Each check returns ``Problem``s with a stable id and a message that says what to install, free
or change. An unexpected exception inside a check becomes an error problem, never a crash.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from ipaddress import IPv4Network, ip_network
from pathlib import Path
from typing import Any

from clusterforge.providers.base import Problem, ProviderError
from clusterforge.providers.local import image as image_mod
from clusterforge.providers.local import nodes as nodes_mod
from clusterforge.providers.local.engine import Engine, EngineNotFound, detect_engine
from clusterforge.providers.local.share import Machine, ShareError, node_shares, this_machine
from clusterforge.spec.models import ClusterSpec

FreeBytes = Callable[[str], int]
GIB = 1 << 30


def disk_free(path: str) -> int:
    """Free bytes on the file system holding ``path`` (or its nearest existing parent)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def storage_root(engine: Engine) -> str:
    fmt = "{{.Store.GraphRoot}}" if engine.name == "podman" else "{{.DockerRootDir}}"
    return engine.run("info", "--format", fmt).stdout.strip() or "/var/lib/containers/storage"


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def check_disk(
    engine: Engine, free_bytes: FreeBytes, need: int = image_mod.IMAGE_SIZE_BYTES
) -> list[Problem]:
    problems = []
    for label, path in (
        ("the engine's image storage", storage_root(engine)),
        ("the image build folder", "/var/tmp"),
    ):
        free = free_bytes(path)
        if free < need:
            problems.append(
                Problem(
                    "error",
                    "disk-low",
                    f"{label} {path} has {_gib(free)} free; building the node image needs {_gib(need)}: "
                    f"free at least {_gib(need - free)} there",
                )
            )
    return problems


def check_image_tools(is_root: bool) -> list[Problem]:
    problems = []
    if not shutil.which("debootstrap"):
        problems.append(
            Problem(
                "error",
                "debootstrap-missing",
                "the node image is built with debootstrap: apt-get install debootstrap",
            )
        )
    if not is_root:
        problems.append(
            Problem(
                "error",
                "image-needs-root",
                "building the node image (debootstrap) needs root: run once as root",
            )
        )
    return problems


def _subnets(info: dict[str, Any]) -> list[str]:
    podman = [s.get("subnet", "") for s in info.get("subnets") or []]
    docker = [c.get("Subnet", "") for c in (info.get("IPAM") or {}).get("Config") or []]
    return [s for s in podman + docker if s]


def check_network(engine: Engine, spec: ClusterSpec) -> list[Problem]:
    if spec.provider.kind != "local":
        return []
    wanted: IPv4Network = spec.provider.network_cidr
    ours = nodes_mod.network_name(spec.stack)
    names = [n for n in engine.run("network", "ls", "--format", "{{.Name}}").stdout.split() if n]
    infos = engine.json("network", "inspect", *names) if names else []
    problems = []
    for info in infos:
        name = info.get("name") or info.get("Name", "")
        if name == ours:
            continue
        for subnet in _subnets(info):
            net = ip_network(subnet, strict=False)
            if net.version == 4 and net.overlaps(wanted):
                problems.append(
                    Problem(
                        "error",
                        "network-cidr-taken",
                        f"provider.network_cidr: {wanted} overlaps {subnet} of {engine.name} network {name!r}: "
                        f"choose a free range in the spec (e.g. another 10.89.x.0/24)",
                    )
                )
    return problems


def check_names(engine: Engine, spec: ClusterSpec) -> list[Problem]:
    ours = set(engine.container_ids({nodes_mod.LABEL_STACK: spec.stack}))
    problems = []
    for node in nodes_mod.node_defs(spec):
        proc = engine.run("container", "inspect", "--format", "{{.Id}}", node.container, check=False)
        if proc.returncode == 0 and proc.stdout.strip() not in ours:
            problems.append(
                Problem(
                    "error",
                    "container-name-taken",
                    f"container {node.container} exists and is not part of stack {spec.stack!r}: "
                    f"remove it (`{engine.name} rm -f {node.container}`) or rename the stack",
                )
            )
    return problems


def check_share(spec: ClusterSpec, machine: Machine | None = None) -> list[Problem]:
    """Every node gets its fixed share of this machine (providers/local/share.py), or the stack is
    refused before anything is created."""
    try:
        node_shares(spec, machine=machine or this_machine())
    except ShareError as exc:
        return [Problem("error", "node-share", str(exc))]
    return []


def run_preflight(
    spec: ClusterSpec,
    *,
    engine: Engine | None = None,
    path: str | None = None,
    free_bytes: FreeBytes = disk_free,
    is_root: bool | None = None,
    packages: tuple[str, ...] = image_mod.PACKAGES,
) -> list[Problem]:
    """All problems at once. ``path``/``free_bytes``/``is_root`` exist so tests can simulate a machine."""
    if engine is None:
        preference = spec.provider.engine if spec.provider.kind == "local" else "auto"
        try:
            engine = detect_engine(preference, path=path)
        except EngineNotFound as exc:
            return [Problem("error", "engine-missing", str(exc))]
    try:
        engine.run("info", timeout=60)
    except ProviderError as exc:
        return [Problem("error", "engine-unusable", f"{engine.name} does not work for this user: {exc}")]

    problems: list[Problem] = []
    suite = spec.provider.debian_suite if spec.provider.kind == "local" else "bookworm"
    checks: list[tuple[str, Callable[[], list[Problem]]]] = [
        ("node-share", lambda: check_share(spec)),
        ("network-check", lambda: check_network(engine, spec)),
        ("name-check", lambda: check_names(engine, spec)),
    ]
    tag = image_mod.image_tag(engine.name, suite, image_mod.machine_mirrors(suite), packages)
    if not engine.image_exists(tag):
        root = os.geteuid() == 0 if is_root is None else is_root
        checks.insert(0, ("image-tools-check", lambda: check_image_tools(root)))
        checks.insert(1, ("disk-check", lambda: check_disk(engine, free_bytes)))
    for check_id, check in checks:
        try:
            problems.extend(check())
        except Exception as exc:  # noqa: BLE001 - a broken check is a finding, not a crash
            problems.append(Problem("error", check_id, f"check could not run: {exc}"))
    return problems
