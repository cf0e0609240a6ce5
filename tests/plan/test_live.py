"""The live side of a plan: Slurm's states and running jobs through the head node, the provider's steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterforge.plan.live import SQUEUE_RUNNING, live_state, parse_squeue_jobs, provider_steps
from clusterforge.providers.base import Node, PlannedNode
from clusterforge.spec.loader import REPO_ROOT, load_spec

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def test_squeue_rows_become_jobs_per_node() -> None:
    jobs = parse_squeue_jobs((DATA / "squeue-running-built.txt").read_text())
    assert jobs == {"node-001": ["12"], "node-002": ["12"], "node-004": ["13", "14_3"]}
    assert parse_squeue_jobs("") == {}


class FakeHead:
    """sinfo and squeue as the head node answers them; records what was asked."""

    def __init__(self, sinfo: str, squeue: str, squeue_rc: int = 0) -> None:
        self.sinfo, self.squeue, self.squeue_rc = sinfo, squeue, squeue_rc
        self.calls: list[list[str]] = []

    def runner(self, node: Node, timeout_s: float = 0) -> Any:
        return self

    def __call__(self, argv: list[str], stdin: str | None = None) -> tuple[int, str, str]:
        self.calls.append(argv)
        if argv[0] == "sinfo":
            return 0, self.sinfo, ""
        if argv == SQUEUE_RUNNING:
            return self.squeue_rc, self.squeue, "" if self.squeue_rc == 0 else "squeue: error: slurm down"
        raise AssertionError(f"a plan asks, never changes: {argv}")


class FakeProvider:
    def __init__(self, names: list[str], head_state: str = "running") -> None:
        self.names = names
        self.head_state = head_state

    def nodes(self, spec: Any) -> list[Node]:
        out = []
        for name in self.names:
            role = "head" if name.startswith("head") else "gpu"
            state = self.head_state if role == "head" else "running"
            out.append(Node(name, "10.0.0.1", name.split("-")[0], role, "local", {}, f"id-{name}", state))
        return out

    def plan(self, spec: Any) -> list[PlannedNode]:
        return [PlannedNode(n, "node", "gpu", "local", "keep") for n in self.names]


def _local() -> Any:
    return load_spec(REPO_ROOT / "stacks" / "local.yaml")[0]


def test_live_state_asks_slurm_through_the_head_node() -> None:
    sinfo = (
        "NODELIST STATE REASON\nnode-001 allocated none\nnode-002 mixed none\n"
        "node-003 drained clusterforge: certifying\nnode-004 idle$ none\n"
    )
    head = FakeHead(sinfo, (DATA / "squeue-running-built.txt").read_text())
    names = ["head-001", "node-001", "node-002", "node-003", "node-004"]
    live = live_state(_local(), FakeProvider(names), head.runner)  # type: ignore[arg-type]
    assert live.up and live.notes == ()
    serving = {n for n, v in live.nodes.items() if v.serving}
    assert serving == {"node-001", "node-002"}  # drained and held (maintenance) nodes are not in service
    assert live.nodes["node-004"].jobs == ("13", "14_3")
    assert all(c[0] in ("sinfo", "squeue") for c in head.calls)


def test_without_a_running_head_node_slurm_is_not_asked_and_the_plan_says_so() -> None:
    head = FakeHead("", "")
    live = live_state(_local(), FakeProvider(["head-001", "node-001"], "exited"), head.runner)  # type: ignore[arg-type]
    assert head.calls == []
    assert not any(n.serving for n in live.nodes.values())
    assert "no running head node" in live.notes[0]


def test_a_failing_squeue_is_a_note_not_a_crash() -> None:
    head = FakeHead("node-001 idle none\n", "", squeue_rc=1)
    live = live_state(_local(), FakeProvider(["head-001", "node-001"]), head.runner)  # type: ignore[arg-type]
    assert live.nodes["node-001"].serving and "squeue on head-001 exited 1" in live.notes[0]


def test_a_provider_that_cannot_be_asked_narrows_the_plan_with_a_note() -> None:
    class Broken:
        def nodes(self, spec: Any) -> list[Node]:
            raise FileNotFoundError("podman")

    live = live_state(_local(), Broken())  # type: ignore[arg-type]
    assert not live.up and "provider not asked (FileNotFoundError: podman)" in live.notes[0]


def test_aws_steps_come_from_the_pulumi_preview_mapped_to_nodes() -> None:
    dev = load_spec(REPO_ROOT / "stacks" / "dev.yaml")[0]
    asked: list[str] = []

    def preview(stack: str) -> dict[str, str]:
        asked.append(stack)
        return {"gpu-002": "replace", "gpu-003": "delete"}

    steps = provider_steps(dev, object(), preview)  # type: ignore[arg-type]
    assert asked == ["dev"]
    assert steps == {"head-001": "keep", "gpu-001": "keep", "gpu-002": "replace", "gpu-003": "delete"}


def test_aws_preview_through_the_automation_seam_with_a_fake_stack(monkeypatch: Any) -> None:
    from pulumi import automation as auto

    from clusterforge.plan import live as live_mod
    from clusterforge.providers.aws import automation as am

    urn = "urn:pulumi:dev::clusterforge::clusterforge:compute:NodePool$aws:ec2/instance:Instance::gpu-001"
    meta = auto.StepEventMetadata(op=auto.OpType.REPLACE, urn=urn, type=am.INSTANCE_TYPE, provider="")
    event = auto.EngineEvent(sequence=1, timestamp=0, resource_pre_event=auto.ResourcePreEvent(metadata=meta))

    class Stack:
        name = "dev"

        def preview(self, **kwargs: Any) -> Any:
            kwargs["on_event"](event)
            return auto.PreviewResult(stdout="", stderr="", change_summary={})

    real = am.StackDriver
    monkeypatch.setattr(am, "StackDriver", lambda name: real(name, factory=lambda n, w: Stack()))
    assert live_mod.pulumi_previewer("dev") == {"gpu-001": "replace"}
