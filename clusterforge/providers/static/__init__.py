"""The ``static`` provider: machines that already exist, from a hand-written inventory, over SSH.

provider = StaticProvider()
problems = provider.preflight(spec)   # inventory vs spec, then one SSH probe per host
nodes = provider.create(spec)         # creates nothing: the hosts as Nodes (same shape as local/aws)
provider.destroy(spec)                # refuses: clusterforge did not create these machines

Nothing is created or destroyed; the pipeline configures, certifies and admits the hosts exactly
as it does container and cloud nodes (``Node.connection`` carries the SSH settings, see ssh.py).
"""

from __future__ import annotations

from pathlib import Path

from clusterforge.catalog import load_compat, load_hardware
from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.providers.base import (
    DestroySummary,
    Node,
    PlannedNode,
    Problem,
    Progress,
    ProviderError,
    no_progress,
)
from clusterforge.providers.static.inventory import InventoryHost, read_inventory
from clusterforge.providers.static.nodes import static_nodes
from clusterforge.providers.static.preflight import Runner, local_problems, run_preflight, run_ssh
from clusterforge.providers.static.ssh import REPO_ROOT, HostSsh
from clusterforge.spec.models import ClusterSpec
from clusterforge.spec.models import StaticProvider as StaticSpec

__all__ = ["REFUSE_DOWN", "StaticProvider", "make_provider"]

RENDERED_INVENTORIES = REPO_ROOT / "inventories"

REFUSE_DOWN = (
    "stack {stack!r} is static: clusterforge did not create its machines, so `invoke down` destroys "
    "nothing. To take a node out of work, drain it (scontrol update nodename=NAME state=drain "
    "reason=...); to forget clusterforge's records of the stack, remove .clusterforge/{stack}/"
)


def inventory_path(spec: ClusterSpec) -> Path:
    assert isinstance(spec.provider, StaticSpec)
    path = Path(spec.provider.inventory).expanduser()
    return path if path.is_absolute() else REPO_ROOT / path


class StaticProvider:
    """Implements ``clusterforge.providers.base.Provider`` for existing machines."""

    def __init__(
        self,
        runner: Runner = run_ssh,
        hardware: HardwareCatalog | None = None,
        rendered: Path = RENDERED_INVENTORIES,
    ):
        self.runner = runner
        self.hardware = hardware
        self.rendered = rendered  # where the pipeline writes inventories/<stack>/ (never the user's file)
        self._passed: ClusterSpec | None = None  # the spec whose preflight passed in this process

    def _hw(self) -> HardwareCatalog:
        return self.hardware or load_hardware()

    def _hosts(self, spec: ClusterSpec) -> list[InventoryHost]:
        return read_inventory(inventory_path(spec))

    def _nodes(self, spec: ClusterSpec) -> tuple[list[Node], list[Problem], dict[str, HostSsh]]:
        assert isinstance(spec.provider, StaticSpec)
        hosts = self._hosts(spec)
        nodes, problems = static_nodes(spec, hosts, self._hw())
        ssh = {h.name: HostSsh.resolve(h, spec.provider.ssh) for h in hosts}
        return nodes, problems, ssh

    def preflight(self, spec: ClusterSpec) -> list[Problem]:
        """Inventory against spec, local files, then every host over SSH (read-only)."""
        try:
            nodes, problems, ssh = self._nodes(spec)
        except ProviderError as exc:
            return [Problem("error", "static-inventory-invalid", str(exc))]
        rendered = self.rendered / spec.stack / "hosts.yml"
        local = local_problems(spec, list(ssh.values()), inventory_path(spec), rendered)
        problems += local
        # A host whose key file is missing or whose options are unsafe is not contacted at all.
        blocked = {p.message.split(":", 1)[0] for p in local}
        reachable = [n for n in nodes if n.name not in blocked]
        supported = load_compat().os_images.providers.get("static", [])
        problems += run_preflight(spec, reachable, ssh, self._hw(), supported, self.runner)
        self._passed = spec if not any(p.level == "error" for p in problems) else None
        return problems

    def plan(self, spec: ClusterSpec) -> list[PlannedNode]:
        nodes, _, _ = self._nodes(spec)
        return [PlannedNode(n.name, n.pool, n.role, n.instance_type, "keep") for n in nodes]

    def create(self, spec: ClusterSpec, progress: Progress = no_progress) -> list[Node]:
        """Nothing to create: the hosts, once preflight passed (run here if not yet for this spec)."""
        if self._passed != spec:
            errors = [p for p in self.preflight(spec) if p.level == "error"]
            if errors:
                raise ProviderError(
                    "static provider preflight failed:\n" + "\n".join(f"  {p.render()}" for p in errors)
                )
        nodes = self.nodes(spec)
        for node in nodes:
            progress(node.name, f"existing machine {node.connection.get('ansible_host', node.address)}")
        return nodes

    def nodes(self, spec: ClusterSpec) -> list[Node]:
        nodes, _, _ = self._nodes(spec)
        return nodes

    def destroy(self, spec: ClusterSpec) -> DestroySummary:
        raise ProviderError(REFUSE_DOWN.format(stack=spec.stack))


def make_provider(spec: ClusterSpec) -> StaticProvider:
    return StaticProvider()
