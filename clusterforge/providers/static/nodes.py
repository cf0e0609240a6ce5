"""The inventory's hosts as the spec's nodes: which pool each is, which hardware, how it is reached.

Pure: the same ``Node`` list the other providers return, plus every inconsistency between the
inventory and the spec (a host no pool takes, a pool whose count differs from its hosts, an
unknown hardware type) as preflight problems naming the host and the fix.
"""

from __future__ import annotations

from collections.abc import Sequence

from clusterforge.catalog.hardware import HardwareCatalog
from clusterforge.providers.base import Node, Problem
from clusterforge.providers.static.inventory import InventoryHost
from clusterforge.providers.static.ssh import HostSsh
from clusterforge.spec.models import ClusterSpec, NodePool, StaticProvider


def _pool_for(spec: ClusterSpec, host: InventoryHost) -> tuple[NodePool | None, str]:
    named = host.variables.get("clusterforge_pool")
    if named:
        try:
            pool = spec.pool(str(named))
        except KeyError:
            names = ", ".join(p.name for p in spec.node_pools)
            return (
                None,
                f"{host.name}: clusterforge_pool {named!r} is not a pool of the spec (pools: {names})",
            )
        if pool.role != host.role:
            return None, (
                f"{host.name}: in the {host.role} group but clusterforge_pool {pool.name!r} is a {pool.role} "
                "pool; move the host or name a pool of its role"
            )
        return pool, ""
    pools = spec.pools_with_role(host.role)
    if len(pools) == 1:
        return pools[0], ""
    if not pools:
        return (
            None,
            f"{host.name}: the spec has no {host.role} pool for it; add one to node_pools or remove the host",
        )
    names = ", ".join(p.name for p in pools)
    return None, f"{host.name}: several {host.role} pools ({names}); set clusterforge_pool on the host"


def static_nodes(
    spec: ClusterSpec, hosts: Sequence[InventoryHost], hw: HardwareCatalog
) -> tuple[list[Node], list[Problem]]:
    """Nodes in inventory order, and the problems that stop ``up`` before any host is touched."""
    assert isinstance(spec.provider, StaticProvider)
    nodes: list[Node] = []
    problems: list[Problem] = []
    members: dict[str, list[str]] = {p.name: [] for p in spec.node_pools}
    for host in hosts:
        pool, why = _pool_for(spec, host)
        if pool is None:
            problems.append(Problem("error", "static-pool", why))
            continue
        members[pool.name].append(host.name)
        instance_type = str(host.variables.get("clusterforge_instance_type") or pool.instance_type)
        if instance_type not in hw:
            known = ", ".join(hw.names(provider="static") + hw.names(provider="aws"))
            problems.append(Problem("error", "static-hardware-unknown", (
                f"{host.name}: hardware {instance_type!r} is not in clusterforge/data/hardware.yaml; "
                f"pick one of {known} (or add your system there with its sources)"
            )))  # fmt: skip
            continue
        ssh = HostSsh.resolve(host, spec.provider.ssh)
        python = str(host.variables.get("ansible_python_interpreter") or "/usr/bin/python3")
        nodes.append(
            Node(
                name=host.name,
                address=str(host.variables.get("clusterforge_address") or ssh.address),
                pool=pool.name,
                role=host.role,
                instance_type=instance_type,
                connection=ssh.connection(python),
                provider_id=f"static:{ssh.address}",
            )
        )
    for pool in spec.node_pools:
        listed = members[pool.name]
        if len(listed) != pool.count:
            hosts_text = ", ".join(listed) or "none"
            problems.append(Problem("error", "static-pool-count", (
                f"pool {pool.name}: count {pool.count} but the inventory gives it {len(listed)} host(s) "
                f"({hosts_text}); set node_pools[{pool.name}].count to {len(listed)} or list the hosts"
            )))  # fmt: skip
    return nodes, problems
