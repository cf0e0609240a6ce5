"""The pure rollout batch planner: which nodes go out of service together, and in what order.

``(impacts, live state, policy, what finished before) -> RolloutPlan``. No I/O: the executor (drain,
converge, reboot, re-certify, resume; see ``RolloutSteps``) asks this planner for the batches,
journals each batch it finishes with ``RolloutRecord``, and on a re-run passes that record back so
the rollout resumes where it stopped.

Rules:
- Only nodes that must leave service (``NodeImpact.drain``) are batched. Changed nodes already out
  of service (drained, down, new) go first, all together: upgrading them costs no capacity.
  Configure-only changes drain nothing and are converged in place.
- A batch holds nodes of one pool, at most ``max_unavailable`` (a count, or a percentage of the
  pool, rounded down, at least 1) minus the pool's nodes already out of service that this rollout
  will not bring back; a pool with no room left is blocked, with the reason, rather than emptied.
- Pools go in spec order, nodes by name: the same inputs always give the same batches, so a
  resumed rollout finds its finished nodes where it left them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from clusterforge.plan.impact import LiveState, NodeImpact
from clusterforge.spec.models import Rollout

UPGRADING_REASON = "clusterforge: upgrading"
OFFLINE_POOL = "(out of service)"


@dataclass(frozen=True)
class Batch:
    index: int  # 1-based, in execution order
    pool: str  # OFFLINE_POOL for the batch of nodes already out of service
    nodes: tuple[str, ...]
    reboot: tuple[str, ...] = ()  # nodes of the batch that need a reboot
    in_service: bool = True  # False: the nodes were out of service already (no drain needed)


@dataclass(frozen=True)
class Blocked:
    pool: str
    nodes: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class RolloutPlan:
    batches: tuple[Batch, ...] = ()
    converge_only: tuple[str, ...] = ()  # configure changes that need no drain
    finished: tuple[str, ...] = ()  # nodes a previous run of this rollout already did
    blocked: tuple[Blocked, ...] = ()

    def nodes(self) -> list[str]:
        return [n for b in self.batches for n in b.nodes]

    def as_dict(self) -> dict[str, Any]:
        return {
            "batches": [
                {"index": b.index, "pool": b.pool, "nodes": list(b.nodes), "reboot": list(b.reboot),
                 "in_service": b.in_service}
                for b in self.batches
            ],
            "converge_only": list(self.converge_only),
            "finished": list(self.finished),
            "blocked": [{"pool": b.pool, "nodes": list(b.nodes), "reason": b.reason} for b in self.blocked],
        }  # fmt: skip


@dataclass
class RolloutRecord:
    """What the journal keeps about one rollout, so an interrupted one resumes where it stopped."""

    rollout_id: str  # e.g. the digest of the target inputs: another change is another rollout
    finished: list[str] = field(default_factory=list)  # nodes upgraded and re-certified
    failed: dict[str, str] = field(default_factory=dict)  # node -> drain reason it was left with
    stopped: str = ""  # why the rollout stopped ("" while running or when complete)

    def finish(self, batch: Batch, failures: Mapping[str, str]) -> None:
        self.finished += [n for n in batch.nodes if n not in failures and n not in self.finished]
        self.failed.update(failures)

    def to_dict(self) -> dict[str, Any]:
        return {"rollout_id": self.rollout_id, "finished": list(self.finished), "failed": dict(self.failed),
                "stopped": self.stopped}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RolloutRecord:
        return cls(
            str(data.get("rollout_id", "")),
            [str(n) for n in data.get("finished", [])],
            {str(k): str(v) for k, v in (data.get("failed") or {}).items()},
            str(data.get("stopped", "")),
        )


class RolloutSteps(Protocol):
    """The executor's seam (drain / converge / reboot / re-certify / resume on the real cluster).

    Each step takes a batch's nodes and returns the nodes that failed it, with a one-line reason;
    the executor drains those with ``clusterforge: <step>: <reason>`` and applies ``on_failure``."""

    def drain(self, nodes: Sequence[str], reason: str, timeout_s: int) -> dict[str, str]: ...
    def converge(self, nodes: Sequence[str]) -> dict[str, str]: ...
    def reboot(self, nodes: Sequence[str]) -> dict[str, str]: ...
    def recertify(self, nodes: Sequence[str]) -> dict[str, str]: ...
    def resume(self, nodes: Sequence[str]) -> dict[str, str]: ...


def resolve_max_unavailable(policy: Rollout, pool_size: int) -> int:
    """A count as given; a percentage of the pool's nodes, rounded down, at least 1."""
    value = policy.max_unavailable
    if isinstance(value, str):
        return max(1, pool_size * int(value.rstrip("%")) // 100)
    return value


def plan_rollout(
    impacts: Sequence[NodeImpact],
    live: LiveState,
    policy: Rollout,
    finished: Iterable[str] = (),
    pool_order: Sequence[str] = (),
) -> RolloutPlan:
    done = set(finished)
    order = {p: i for i, p in enumerate(pool_order)}
    todo = sorted(
        (i for i in impacts if i.changed and i.node not in done and i.provision != "destroy"),
        key=lambda i: (order.get(i.pool, len(order)), i.pool, i.node),
    )
    offline = [i for i in todo if not i.drain and (i.recertify or i.reboot or i.provision != "keep")]
    offline_names = {i.node for i in offline}
    converge_only = tuple(i.node for i in todo if not i.drain and i.node not in offline_names)
    batches: list[Batch] = []
    if offline:
        batches.append(
            Batch(
                1,
                OFFLINE_POOL,
                tuple(i.node for i in offline),
                tuple(i.node for i in offline if i.reboot),
                False,
            )
        )
    by_pool: dict[str, list[NodeImpact]] = {}
    for i in todo:
        if i.drain:
            by_pool.setdefault(i.pool, []).append(i)
    targets = {i.node for i in todo}
    blocked: list[Blocked] = []
    pool_of = {i.node: i.pool for i in impacts}
    for pool, members in by_pool.items():
        in_pool = [n for n in live.nodes.values() if (n.pool or pool_of.get(n.name, "")) == pool]
        size = max(len(in_pool), len(members))
        away = sum(1 for n in in_pool if not n.serving and n.name not in targets)
        room = resolve_max_unavailable(policy, size) - away
        names = tuple(i.node for i in members)
        if room < 1:
            why = (
                f"{away} node(s) of pool {pool} are out of service already and max_unavailable is "
                f"{policy.max_unavailable}: bring them back (or raise rollout.max_unavailable) first"
            )
            blocked.append(Blocked(pool, names, why))
            continue
        for start in range(0, len(members), room):
            chunk = members[start : start + room]
            batches.append(
                Batch(
                    len(batches) + 1,
                    pool,
                    tuple(i.node for i in chunk),
                    tuple(i.node for i in chunk if i.reboot),
                )
            )
    return RolloutPlan(tuple(batches), converge_only, tuple(sorted(done)), tuple(blocked))
