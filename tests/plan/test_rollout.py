"""The rollout batch planner on simulated fleets of thousands of nodes, and the spec's rollout block."""

from __future__ import annotations

import random

import pytest
from pydantic import ValidationError

from clusterforge.plan.impact import LiveNode, LiveState, NodeImpact
from clusterforge.plan.rollout import (
    OFFLINE_POOL,
    RolloutRecord,
    plan_rollout,
    resolve_max_unavailable,
)
from clusterforge.spec.models import Rollout

POOLS = {"a": 1500, "b": 900, "c": 7}


def fleet(
    serving_share: float = 1.0, seed: int = 7, recertify: bool = True, reboot: bool = False
) -> tuple[list[NodeImpact], LiveState]:
    rng = random.Random(seed)
    impacts, nodes = [], {}
    for pool, count in POOLS.items():
        for k in range(1, count + 1):
            name = f"{pool}-{k:04d}"
            serving = rng.random() < serving_share
            impacts.append(
                NodeImpact(
                    name,
                    pool,
                    "gpu",
                    configure=("nccl",),
                    recertify=recertify,
                    reboot=reboot,
                    drain=serving and recertify,
                )
            )
            nodes[name] = LiveNode(name, serving=serving, pool=pool)
    return impacts, LiveState(nodes=nodes)


def assert_invariants(impacts: list[NodeImpact], live: LiveState, policy: Rollout) -> None:
    plan = plan_rollout(impacts, live, policy, pool_order=list(POOLS))
    planned = plan.nodes()
    assert len(planned) == len(set(planned)), "a node is in two batches"
    changed = {i.node for i in impacts if i.changed}
    assert set(planned) | set(plan.converge_only) | {n for b in plan.blocked for n in b.nodes} == changed
    for batch in plan.batches:
        if batch.pool == OFFLINE_POOL:
            assert batch.index == 1 and not batch.in_service
            assert all(not live.nodes[n].serving for n in batch.nodes)
            continue
        assert {n.split("-")[0] for n in batch.nodes} == {batch.pool}, "a batch mixes pools"
        size = POOLS[batch.pool]
        away = sum(1 for n in live.nodes.values() if n.name.startswith(batch.pool) and not n.serving)
        assert len(batch.nodes) <= resolve_max_unavailable(policy, size), batch
        assert all(live.nodes[n].serving for n in batch.nodes)
        del away  # nodes out of service are all targets here: they come back first


@pytest.mark.parametrize("max_unavailable", [1, 3, 64, "5%", "50%", "100%"])
@pytest.mark.slow
def test_batches_respect_max_unavailable_and_pools_on_a_fleet(max_unavailable: int | str) -> None:
    impacts, live = fleet(serving_share=0.9)
    assert_invariants(impacts, live, Rollout(max_unavailable=max_unavailable))


def test_batch_one_gives_one_node_per_batch_in_pool_then_name_order() -> None:
    impacts, live = fleet()
    plan = plan_rollout(impacts, live, Rollout(max_unavailable=1), pool_order=list(POOLS))
    assert len(plan.batches) == sum(POOLS.values())
    assert [b.nodes[0] for b in plan.batches[:2]] == ["a-0001", "a-0002"]
    assert plan.batches[1500].nodes == ("b-0001",)
    assert [b.index for b in plan.batches] == list(range(1, len(plan.batches) + 1))


def test_a_percentage_is_of_the_pool_rounded_down_and_at_least_one() -> None:
    policy = Rollout(max_unavailable="10%")
    assert resolve_max_unavailable(policy, 1500) == 150
    assert resolve_max_unavailable(policy, 7) == 1
    impacts, live = fleet()
    plan = plan_rollout(impacts, live, policy, pool_order=list(POOLS))
    sizes = {b.pool: len(b.nodes) for b in plan.batches}
    assert sizes == {"a": 150, "b": 90, "c": 1}
    assert sum(1 for b in plan.batches if b.pool == "c") == 7


def test_nodes_out_of_service_go_first_together() -> None:
    impacts, live = fleet(serving_share=0.8)
    plan = plan_rollout(impacts, live, Rollout(max_unavailable=8), pool_order=list(POOLS))
    first = plan.batches[0]
    away = {n for n, v in live.nodes.items() if not v.serving}
    assert first.pool == OFFLINE_POOL and set(first.nodes) == away
    assert all(b.in_service for b in plan.batches[1:])


def test_a_pool_with_no_room_is_blocked_with_the_reason_not_emptied() -> None:
    impacts, live = fleet()
    nodes = dict(live.nodes)
    for k in (1, 2):  # two nodes of pool c drained by a person: not this rollout's to bring back
        nodes[f"c-000{k}"] = LiveNode(f"c-000{k}", serving=False, pool="c")
    impacts = [i for i in impacts if i.node not in ("c-0001", "c-0002")]
    plan = plan_rollout(impacts, LiveState(nodes=nodes), Rollout(max_unavailable=2), pool_order=list(POOLS))
    assert [b.pool for b in plan.blocked] == ["c"]
    assert "2 node(s) of pool c are out of service already" in plan.blocked[0].reason
    assert not any(b.pool == "c" for b in plan.batches)


def test_configure_only_changes_are_converged_in_place() -> None:
    impacts, live = fleet(recertify=False)
    plan = plan_rollout(impacts, live, Rollout())
    assert plan.batches == () and len(plan.converge_only) == sum(POOLS.values())


def test_reboots_are_named_per_batch() -> None:
    impacts, live = fleet(reboot=True)
    plan = plan_rollout(impacts, live, Rollout(max_unavailable=4), pool_order=list(POOLS))
    assert all(b.reboot == b.nodes for b in plan.batches)


def test_a_resumed_rollout_skips_what_finished_and_keeps_the_same_batches() -> None:
    impacts, live = fleet()
    policy = Rollout(max_unavailable=50)
    first = plan_rollout(impacts, live, policy, pool_order=list(POOLS))
    record = RolloutRecord("r1")
    for batch in first.batches[:5]:
        record.finish(batch, {})
    record.finish(first.batches[5], {first.batches[5].nodes[0]: "clusterforge: nccl-allreduce: 12 GB/s"})
    again = RolloutRecord.from_dict(record.to_dict())
    assert again == record
    resumed = plan_rollout(impacts, live, policy, finished=again.finished, pool_order=list(POOLS))
    assert set(resumed.finished) == set(again.finished) and len(again.finished) == 5 * 50 + 49
    assert not set(resumed.nodes()) & set(again.finished)
    # The failed node is retried with the rest: it heads the first batch left.
    assert resumed.batches[0].nodes[0] == first.batches[5].nodes[0]


def test_a_resumed_rollout_without_failures_runs_exactly_the_batches_left() -> None:
    impacts, live = fleet()
    policy = Rollout(max_unavailable="3%")
    first = plan_rollout(impacts, live, policy, pool_order=list(POOLS))
    record = RolloutRecord("r1")
    for batch in first.batches[:9]:
        record.finish(batch, {})
    resumed = plan_rollout(impacts, live, policy, finished=record.finished, pool_order=list(POOLS))
    assert [b.nodes for b in resumed.batches] == [b.nodes for b in first.batches[9:]]


def test_destroyed_nodes_are_not_batched() -> None:
    impacts = [NodeImpact("a-0001", "a", "gpu", provision="destroy", drain=True)]
    plan = plan_rollout(impacts, LiveState(nodes={"a-0001": LiveNode("a-0001", serving=True)}), Rollout())
    assert plan.batches == ()


@pytest.mark.parametrize("bad", [0, -1, 1.5, "0%", "101%", "ten", True])
def test_the_rollout_block_refuses_bad_values(bad: object) -> None:
    with pytest.raises(ValidationError):
        Rollout(max_unavailable=bad)  # type: ignore[arg-type]


def test_the_rollout_block_is_strict() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Rollout.model_validate({"max_unavailble": 2})
    policy = Rollout.model_validate(
        {"max_unavailable": "25%", "drain_timeout_s": 600, "on_failure": "continue"}
    )
    assert policy.on_drain_timeout == "stop"
