"""The rollout loop over recorded fake steps: order, policies, journal per batch, on fleets of thousands."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from clusterforge.plan.impact import LiveNode, LiveState, NodeImpact
from clusterforge.plan.rollout import UPGRADING_REASON, RolloutRecord, plan_rollout
from clusterforge.rollout.executor import execute
from clusterforge.spec.models import Rollout


class Steps:
    """Records every call; fails what it is told to."""

    def __init__(self, fail: dict[str, dict[str, str]] | None = None, busy: set[str] | None = None):
        self.fail_at = fail or {}  # step -> node -> line
        self.busy = set(busy or ())  # nodes whose jobs outlive the drain
        self.requeue_clears = False
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.drained: dict[str, str] = {}  # node -> reason it is drained with now

    def _step(self, step: str, nodes: Sequence[str]) -> dict[str, str]:
        self.calls.append((step, tuple(nodes)))
        return {n: why for n, why in self.fail_at.get(step, {}).items() if n in nodes}

    def drain(self, nodes: Sequence[str], reason: str, timeout_s: int) -> dict[str, str]:
        self.calls.append(("drain", tuple(nodes)))
        for n in nodes:
            self.drained[n] = reason
        return {
            n: f"drain timed out after {timeout_s} s: job(s) 7 still running" for n in nodes if n in self.busy
        }

    def requeue(self, nodes: Sequence[str], timeout_s: int) -> dict[str, str]:
        self.calls.append(("requeue", tuple(nodes)))
        if self.requeue_clears:
            self.busy -= set(nodes)
        return {n: "still busy" for n in nodes if n in self.busy}

    def converge(self, nodes: Sequence[str]) -> dict[str, str]:
        return self._step("converge", nodes)

    def reboot(self, nodes: Sequence[str]) -> dict[str, str]:
        return self._step("reboot", nodes)

    def recertify(self, nodes: Sequence[str]) -> dict[str, str]:
        failures = self._step("recertify", nodes)
        for n in nodes:
            if n in failures:
                self.drained[n] = failures[n]
            else:
                self.drained.pop(n, None)  # certify releases what passes
        return failures

    def resume(self, nodes: Sequence[str]) -> dict[str, str]:
        self.calls.append(("resume", tuple(nodes)))
        for n in nodes:
            self.drained.pop(n, None)
        return {}

    def fail(self, node: str, reason: str) -> None:
        self.drained[node] = reason


def fleet(n: int, reboot: bool = False) -> tuple[list[NodeImpact], LiveState]:
    impacts = [
        NodeImpact(
            f"gpu-{i:05d}", "gpu", "gpu", configure=("nccl",), recertify=True, reboot=reboot, drain=True
        )
        for i in range(1, n + 1)
    ]
    return impacts, LiveState(nodes={i.node: LiveNode(i.node, serving=True, pool="gpu") for i in impacts})


def run(impacts, live, policy, steps, record=None):
    plan = plan_rollout(
        impacts, live, policy, finished=(record.finished if record else ()), pool_order=["gpu"]
    )
    record = record or RolloutRecord("r1")
    saved: list[dict] = []
    upgraded: list[str] = []
    result = execute(
        plan, steps, policy, record, save=lambda r: saved.append(r.to_dict()), on_upgraded=upgraded.extend
    )
    return plan, result, saved, upgraded


def test_batches_go_in_turn_drain_converge_recertify_resume() -> None:
    impacts, live = fleet(3, reboot=True)
    steps = Steps()
    _, result, saved, upgraded = run(impacts, live, Rollout(max_unavailable=1), steps)
    per_node = [c for c in steps.calls if c[1] == ("gpu-00002",)]
    assert [c[0] for c in per_node] == ["drain", "converge", "reboot", "recertify", "resume"]
    # node 2 is only drained once node 1 is back in service
    order = [c for c in steps.calls if c[0] in ("drain", "resume")]
    assert order == [("drain", ("gpu-00001",)), ("resume", ("gpu-00001",)), ("drain", ("gpu-00002",)),
                     ("resume", ("gpu-00002",)), ("drain", ("gpu-00003",)), ("resume", ("gpu-00003",))]  # fmt: skip
    assert upgraded == ["gpu-00001", "gpu-00002", "gpu-00003"] == result.upgraded
    assert steps.drained == {} and not result.stopped
    assert [len(s["finished"]) for s in saved] == [1, 2, 3, 3]  # journalled after every batch


def test_second_batch_failing_recertification_stops_with_that_node_drained_the_rest_serving() -> None:
    impacts, live = fleet(4)
    why = "clusterforge: software-versions: nvidia-driver 535.261.03 installed, 535.309.01 pinned"
    steps = Steps(fail={"recertify": {"gpu-00002": why}})
    _, result, saved, upgraded = run(impacts, live, Rollout(max_unavailable=1), steps)
    assert result.upgraded == ["gpu-00001"] and upgraded == ["gpu-00001"]
    assert result.failed == {"gpu-00002": why}  # the check's own reason, not re-wrapped
    assert steps.drained == {"gpu-00002": why}
    assert result.not_started == ["gpu-00003", "gpu-00004"]
    assert not any("gpu-00003" in c[1] for c in steps.calls)  # never touched
    assert result.stopped.startswith("batch 2: gpu-00002 failed")
    assert saved[-1]["failed"] == {"gpu-00002": why} and saved[-1]["finished"] == ["gpu-00001"]


def test_on_failure_continue_goes_on_and_converge_failures_get_a_step_reason() -> None:
    impacts, live = fleet(3)
    steps = Steps(
        fail={"converge": {"gpu-00001": "TASK [Install] failed: E: Version '535.309.01-1' not found"}}
    )
    _, result, _, _ = run(impacts, live, Rollout(max_unavailable=1, on_failure="continue"), steps)
    assert result.upgraded == ["gpu-00002", "gpu-00003"]
    reason = steps.drained["gpu-00001"]
    assert reason.startswith("clusterforge: converge: TASK [Install] failed"), reason
    assert ("recertify", ("gpu-00001",)) not in steps.calls  # a failed converge is not certified


@pytest.mark.parametrize("policy", ["stop", "skip", "requeue"])
def test_drain_timeout_policy(policy: str) -> None:
    impacts, live = fleet(3)
    steps = Steps(busy={"gpu-00001"})
    steps.requeue_clears = policy == "requeue"
    _, result, _, _ = run(impacts, live, Rollout(max_unavailable=1, on_drain_timeout=policy), steps)
    if policy == "requeue":
        assert ("requeue", ("gpu-00001",)) in steps.calls
        assert result.upgraded == ["gpu-00001", "gpu-00002", "gpu-00003"]
        return
    assert "gpu-00001" in result.skipped and "resumed untouched" in result.skipped["gpu-00001"]
    assert ("converge", ("gpu-00001",)) not in steps.calls  # untouched
    assert "gpu-00001" not in steps.drained  # back in service
    if policy == "stop":
        assert result.stopped.startswith("batch 1: drain timed out on gpu-00001")
        assert result.not_started == ["gpu-00002", "gpu-00003"]
    else:
        assert result.upgraded == ["gpu-00002", "gpu-00003"] and not result.stopped


def test_resume_after_interruption_skips_finished_batches() -> None:
    impacts, live = fleet(3)

    class Interrupting(Steps):
        def recertify(self, nodes: Sequence[str]) -> dict[str, str]:
            if "gpu-00002" in nodes:
                raise KeyboardInterrupt
            return super().recertify(nodes)

    record = RolloutRecord("r1")
    saved: list[dict] = []
    plan = plan_rollout(impacts, live, Rollout(max_unavailable=1), pool_order=["gpu"])
    with pytest.raises(KeyboardInterrupt):
        execute(plan, Interrupting(), Rollout(), record, save=lambda r: saved.append(r.to_dict()),
                on_upgraded=lambda n: None)  # fmt: skip
    assert saved[-1]["finished"] == ["gpu-00001"]
    # The journal's record comes back; gpu-00002 was drained by the cut-short run: out of service.
    again = RolloutRecord.from_dict(saved[-1])
    live2 = LiveState(nodes={**live.nodes, "gpu-00002": LiveNode("gpu-00002", serving=False, pool="gpu")})
    impacts2 = [
        i if i.node != "gpu-00002" else NodeImpact(i.node, "gpu", "gpu", recertify=True) for i in impacts
    ]
    steps = Steps()
    _, result, _, _ = run(impacts2, live2, Rollout(max_unavailable=1), steps, record=again)
    assert not any("gpu-00001" in c[1] for c in steps.calls)  # finished before: not redone
    assert ("drain", ("gpu-00002",)) not in steps.calls  # already out of service: no drain needed
    assert result.upgraded == ["gpu-00002", "gpu-00003"]
    assert again.finished == ["gpu-00001", "gpu-00002", "gpu-00003"]


def test_thousands_of_nodes_never_exceed_max_unavailable_and_stop_at_the_first_failure() -> None:
    impacts, live = fleet(4000)
    fails = {"gpu-01234": "clusterforge: gpu-burn: GPU 3 FAULTY"}
    steps = Steps(fail={"recertify": fails})
    policy = Rollout(max_unavailable="5%")
    plan, result, _, _ = run(impacts, live, policy, steps)
    out = 0
    widest = 0
    for step, nodes in steps.calls:
        if step == "drain":
            out += len(nodes)
        elif step == "resume":
            out -= len(nodes)
        widest = max(widest, out)
    assert widest <= 200  # 5 % of 4,000
    failed_batch = next(b for b in plan.batches if "gpu-01234" in b.nodes)
    assert result.failed == fails and result.stopped.startswith(f"batch {failed_batch.index}:")
    assert len(result.upgraded) == 200 * failed_batch.index - 1
    assert len(result.not_started) == 4000 - 200 * failed_batch.index
    assert all(r == UPGRADING_REASON or n == "gpu-01234" for n, r in steps.drained.items())
    assert set(steps.drained) == {"gpu-01234"}
