"""The software digest of a pool's node image: what playbooks/node_software.yml would put on it.

A hash per role of the role's files and of the variables the inventory gives a node of the pool
(as ``clusterforge.plan.inputs`` fingerprints roles for `invoke plan`), plus the playbook itself and
the base image the bake starts from. Two pools, or two points in time, with the same digest need
the same image; a different digest means the image is stale. ``pins`` keeps the pinned versions in
words, so that a stale image can be explained (``nvidia_driver_version 535.261.03 -> 535.309.01``).

What is left out on purpose, because an image does not hold it:
- the cluster part (cluster.yml) and the per-machine roles (node_image, local_scratch);
- of the slurm role (installed only, slurm_install_only), every variable but those that choose what
  is installed: the node list, partitions and controller change with the cluster, not the image.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.inventory import render_inventory
from clusterforge.plan.inputs import EXTRA_ROLE_SOURCES, digest, read_plays, roles_for, tree_hash
from clusterforge.providers.base import Node
from clusterforge.spec.loader import REPO_ROOT
from clusterforge.spec.models import ClusterSpec

NODE_SOFTWARE = "playbooks/node_software.yml"
# Roles of node_software.yml that belong to the machine or decide the skip, not to the image.
NOT_BAKED = frozenset({"node_image", "local_scratch"})
# The slurm role installs only in node_software.yml: these variables choose what it installs.
# slurm_source_cache_dir is where the control machine keeps builds: not part of what is built.
IMAGE_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "slurm": ("slurm_version", "slurm_install_method", "slurm_source_", "slurm_dev_headers"),
}
IMAGE_EXCLUDED: Mapping[str, tuple[str, ...]] = {"slurm": ("slurm_source_cache_dir",)}


@dataclass(frozen=True)
class SoftwareDigest:
    """One pool's node software: ``digest`` (16 hex) over ``parts``; ``pins`` in words."""

    digest: str
    parts: dict[str, str] = field(default_factory=dict)
    pins: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "parts": dict(self.parts), "pins": dict(self.pins)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SoftwareDigest:
        return cls(
            str(data.get("digest", "")),
            {str(k): str(v) for k, v in (data.get("parts") or {}).items()},
            {str(k): str(v) for k, v in (data.get("pins") or {}).items()},
        )


def _wanted(role: str, key: str) -> bool:
    if not key.startswith(f"{role}_"):
        return False
    if any(key.startswith(prefix) for prefix in IMAGE_EXCLUDED.get(role, ())):
        return False
    allowed = IMAGE_VARIABLES.get(role)
    return allowed is None or any(key == a or (a.endswith("_") and key.startswith(a)) for a in allowed)


def pool_variables(spec: ClusterSpec, pool: str, hw: HardwareCatalog | None = None) -> dict[str, Any]:
    """The inventory variables (group_vars/all and host vars) a node of ``pool`` gets, placed nowhere."""
    p = spec.pool(pool)
    node = Node(spec.node_names(p)[0] if p.count else f"{pool}-001", "", p.name, p.role, p.instance_type, {})
    inventory = render_inventory(spec, [node], Path("munge.key"), catalog=hw)
    variables: dict[str, Any] = {}
    for group in inventory.group_vars.values():
        variables.update(group)
    for group in inventory.hosts["all"]["children"].values():
        variables.update((group.get("hosts") or {}).get(node.name) or {})
    return variables


def software_digest(
    spec: ClusterSpec,
    pool: str,
    base: str,
    root: Path = REPO_ROOT,
    hw: HardwareCatalog | None = None,
) -> SoftwareDigest:
    """The digest of ``pool``'s node software, baked onto the base image ``base`` (a local image tag
    or an AMI id: a new base is a new image)."""
    p = spec.pool(pool)
    variables = pool_variables(spec, pool, hw)
    node = Node(f"{pool}-001", "", p.name, p.role, p.instance_type, {})
    plays = read_plays(root, NODE_SOFTWARE)
    parts: dict[str, str] = {
        "base": base,
        "os_image": spec.software.os_image,
        "playbook": hashlib.sha256((root / NODE_SOFTWARE).read_bytes()).hexdigest()[:16],
    }
    pins: dict[str, str] = {}
    for role, play_vars in roles_for(plays, node).items():
        if role in NOT_BAKED:
            continue
        mine = {k: v for k, v in sorted(variables.items()) if _wanted(role, k)}
        files = tree_hash(root, (f"roles/{role}", *EXTRA_ROLE_SOURCES.get(role, ())))
        parts[f"role {role}"] = digest([files, mine, play_vars])
        # In words, to say why an image is stale (a switched-off role's too: its inputs count).
        pins.update({k: str(v) for k, v in mine.items() if k.endswith("_version") and v})
    return SoftwareDigest(digest(parts), parts, pins)


def stale_reasons(built: SoftwareDigest, now: SoftwareDigest) -> list[str]:
    """Why an image built for ``built`` does not fit ``now`` (empty: it fits), one phrase each:
    the pins that moved first, then any other part (a role whose pin moved is not named again)."""
    if built.digest == now.digest:
        return []
    out: list[str] = []
    moved_roles: set[str] = set()
    for key in sorted(set(built.pins) | set(now.pins)):
        old, new = built.pins.get(key, "unset"), now.pins.get(key, "unset")
        if old != new:
            out.append(f"{key} {old} -> {new}")
            moved_roles.update(r for r in _roles(built, now) if key.startswith(f"{r}_"))
    for key in sorted(set(built.parts) | set(now.parts)):
        was, now_part = built.parts.get(key), now.parts.get(key)
        if was == now_part:
            continue
        if key == "base":
            out.append(f"base image {was or 'none'} -> {now_part or 'none'}")
        elif key.startswith("role "):
            if key[5:] not in moved_roles:
                what = (
                    "role added"
                    if was is None
                    else "role removed"
                    if now_part is None
                    else "files or variables changed"
                )
                out.append(f"{key[5:]}: {what}")
        else:
            out.append(f"{key} changed")
    return out or ["software digest changed"]


def _roles(*digests: SoftwareDigest) -> set[str]:
    return {k[5:] for d in digests for k in d.parts if k.startswith("role ")}
