"""`invoke image.bake`: build a pool's node image once, on one builder machine.

The builder boots the pool's base image and then, through the same Ansible and validators the
nodes use:

1. converges ``playbooks/node_software.yml`` (the NVIDIA stack, EFA, the Slurm packages, the
   validators runtime; the instance-store scratch is left to the machines that boot it);
2. runs the pool's single-node checks (``playbooks/certify.yml``, the pool's profile): an image
   whose builder fails them is never registered;
3. records on itself what it holds (``playbooks/image.yml``, role node_image's ``record``: the
   software digest and the drift probe's state of every item the node software manages) and
   removes what belongs to the builder, not the image (its NODE.json and reports, machine id,
   package caches);
4. is registered as an image (local: a container image committed from it; aws: an AMI), and the
   image is written to ``<state>/<stack>/images.json`` with its software digest.

The provider part is a ``Builder`` (clusterforge/images/local.py, aws.py); everything else is
shared. A pool whose digest already has an image (``Builder.existing``) is not baked again unless
asked (``force``).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from clusterforge.ansible.runner import PlaybookResult, PlaybookRun
from clusterforge.drift.manages import Managed, managed_for
from clusterforge.drift.nodes import inventory_variables
from clusterforge.images.digest import NODE_SOFTWARE, NOT_BAKED, SoftwareDigest, software_digest
from clusterforge.images.record import ImageRecord, save_record
from clusterforge.inventory import render_inventory, write_inventory
from clusterforge.journal import now_iso, stack_dir, write_atomic
from clusterforge.node.config import dumps, profile_for, render_node_config
from clusterforge.node.report_model import NodeReport, ReportError
from clusterforge.plan.inputs import read_plays, roles_for
from clusterforge.providers.base import Node
from clusterforge.spec.loader import REPO_ROOT
from clusterforge.spec.models import ClusterSpec

PLAYBOOKS = REPO_ROOT / "playbooks"
Progress = Callable[[str], None]


class BakeError(Exception):
    """The bake failed; the message says at which step and where the log is."""


class Builder(Protocol):
    """The provider's part of a bake."""

    kind: str  # "local" | "aws"

    def base(self, spec: ClusterSpec) -> str:
        """The base image a pool's builder boots (its identity is part of the digest)."""
        ...

    def existing(self, spec: ClusterSpec, pool: str, software: SoftwareDigest) -> str | None:
        """An image already registered for exactly this digest, if any."""
        ...

    def start(self, spec: ClusterSpec, pool: str, base: str, progress: Progress) -> Node:
        """Boot a builder of ``pool``'s instance type from ``base``; a Node Ansible can reach."""
        ...

    def register(self, spec: ClusterSpec, pool: str, node: Node, software: SoftwareDigest) -> str:
        """Turn the builder into an image; returns its id (tag or AMI)."""
        ...

    def discard(self, spec: ClusterSpec, node: Node) -> None:
        """Remove the builder, whatever happened."""
        ...


@dataclass(frozen=True)
class BakePaths:
    root: Path  # <state>/<stack>/bake/<pool>/

    @property
    def inventory(self) -> Path:
        return self.root / "inventory"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def config(self) -> Path:
        return self.root / "node-config"

    @property
    def reports(self) -> Path:
        return self.root / "reports"


def image_managed(spec: ClusterSpec, node: Node, inventory: Path, root: Path = REPO_ROOT) -> Managed:
    """What the node software manages on ``node``: the items the image's record lists."""
    plays = read_plays(root, NODE_SOFTWARE)
    roles = {r: v for r, v in roles_for(plays, node).items() if r not in NOT_BAKED}
    return managed_for(roles, inventory_variables(inventory).get(node.name, {}), spec.software.os_image)


def _verdict(report: Path) -> tuple[bool, str]:
    """The builder's single-node verdict from its report.json, in one line."""
    try:
        data = NodeReport.read(report)
    except ReportError as exc:
        return False, f"no report ({exc})"
    bad = [f"{c.id}: {c.summary}" for c in data.failing]
    passed = data.verdict == "pass" and not bad
    head = f"{'pass' if passed else 'FAIL'}: {len(data.checks)} checks ({data.profile})"
    return passed, head + (f"; {'; '.join(bad[:3])}" if bad else "")


def _run(
    playbook: str, paths: BakePaths, env: dict[str, str], extravars: dict[str, Any], name: str
) -> PlaybookResult:
    run = PlaybookRun(
        PLAYBOOKS / playbook,
        paths.inventory / "hosts.yml",
        paths.runs,
        extravars=extravars,
        env=env,
        limit=[name],
    )
    result = run.run()
    if not result.host_ok(name):
        failure = result.failures.get(name)
        why = failure.render() if failure else f"{playbook} {result.status} (rc {result.rc})"
        raise BakeError(f"{playbook} on the builder {name}: {why}; log: {result.log}")
    return result


def bake_pool(
    spec: ClusterSpec,
    pool: str,
    builder: Builder,
    env: dict[str, str],
    progress: Progress = lambda _line: None,
    force: bool = False,
    root: Path = REPO_ROOT,
) -> ImageRecord:
    """Bake ``pool``'s image (or reuse one with the same digest) and record it; returns the record."""
    base = builder.base(spec)
    software = software_digest(spec, pool, base, root)
    found = None if force else builder.existing(spec, pool, software)
    if found:
        progress(f"pool {pool}: image {found} already holds digest {software.digest}: not baked again")
        record = ImageRecord(pool, builder.kind, found, software, now_iso(), notes=["reused: same digest"])
        save_record(spec.stack, record)
        return record
    paths = BakePaths(stack_dir(spec.stack) / "bake" / pool)
    shutil.rmtree(paths.config, ignore_errors=True)
    shutil.rmtree(paths.reports, ignore_errors=True)
    progress(f"pool {pool}: starting a builder from {base} (digest {software.digest})")
    node = builder.start(spec, pool, base, progress)
    try:
        write_inventory(render_inventory(spec, [node], stack_dir(spec.stack) / "munge.key"), paths.inventory)
        # The instance store belongs to each machine, not to the image.
        progress(f"pool {pool}: converging node_software.yml on {node.name}")
        converged = _run("node_software.yml", paths, env, {"local_scratch_enabled": False}, node.name)
        progress(f"pool {pool}: {converged.changed} changes; running the single-node checks")
        profile_name, profile = profile_for(spec, pool)
        write_atomic(paths.config / node.name / "NODE.json", dumps(render_node_config(spec, node)))
        # certify.yml takes letters, digits, . _ - only (now_iso's "+00:00" would be refused)
        run_id = "bake-" + re.sub(r"[^A-Za-z0-9._-]", "", now_iso())
        _run(
            "certify.yml",
            paths,
            env,
            {
                "certify_profile": profile.suite,
                "certify_config_dir": str(paths.config),
                "certify_reports_dir": str(paths.reports),
                "certify_run_id": run_id,
            },
            node.name,
        )
        passed, checks = _verdict(paths.reports / node.name / "report.json")
        if not passed:
            raise BakeError(
                f"pool {pool}: the builder failed its single-node checks (profile {profile_name}): {checks}; "
                f"report: {paths.reports / node.name / 'report.json'}; no image registered"
            )
        managed = image_managed(spec, node, paths.inventory, root)
        progress(f"pool {pool}: checks {checks}; recording {len(managed.item_names())} items on the image")
        _run(
            "image.yml",
            paths,
            env,
            {
                "node_image_bake_digest": software.digest,
                "node_image_bake_managed": managed.as_probe_input(),
                "node_image_bake_name": f"{spec.stack}/{pool}",
            },
            node.name,
        )
        progress(f"pool {pool}: registering the image")
        image = builder.register(spec, pool, node, software)
    finally:
        builder.discard(spec, node)
    record = ImageRecord(
        pool,
        builder.kind,
        image,
        software,
        now_iso(),
        builder=node.provider_id or node.name,
        checks=checks,
        items=len(managed.item_names()),
    )
    save_record(spec.stack, record)
    progress(f"pool {pool}: baked {image} (digest {software.digest})")
    return record
