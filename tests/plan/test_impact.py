"""The pure diff: spec changes against the real roles and playbooks, on fleets of thousands of nodes."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from clusterforge.plan.impact import LiveNode, LiveState, NodeImpact, pending, plan_impacts
from clusterforge.plan.inputs import StackInputs, stack_inputs
from clusterforge.spec.loader import REPO_ROOT, load_spec
from clusterforge.spec.models import ClusterSpec

FLEET = 2048


@cache
def spec(stack: str, count: int = 0) -> ClusterSpec:
    loaded, _ = load_spec(REPO_ROOT / "stacks" / f"{stack}.yaml")
    if not count:
        return loaded
    pools = [p.model_copy(update={"count": count}) if p.role == "gpu" else p for p in loaded.node_pools]
    return loaded.model_copy(update={"node_pools": pools})


def software(base: ClusterSpec, **changes: object) -> ClusterSpec:
    return base.model_copy(update={"software": base.software.model_copy(update=changes)})


def driver(base: ClusterSpec, version: str) -> ClusterSpec:
    return software(base, driver=base.software.driver.model_copy(update={"version": version}))


def inputs(cluster: ClusterSpec, label: str = "side") -> StackInputs:
    return stack_inputs(cluster, REPO_ROOT, label)


def by_node(impacts: list[NodeImpact]) -> dict[str, NodeImpact]:
    return {i.node: i for i in impacts}


def test_no_change_is_no_impact_on_a_fleet() -> None:
    base = spec("prod", FLEET)
    impacts = plan_impacts(inputs(base), inputs(base))
    assert len(impacts) == FLEET + 1
    assert not pending(impacts)
    assert all(i.actions() == [] for i in impacts)


def test_a_version_bump_configures_and_recertifies_every_compute_node() -> None:
    base = spec("prod", FLEET)
    impacts = by_node(plan_impacts(inputs(base), inputs(software(base, nccl="2.27.3"))))
    compute = [i for i in impacts.values() if i.role == "gpu"]
    assert len(compute) == FLEET
    for i in compute:
        assert i.actions() == ["configure", "re-certify"], i
        assert i.configure == ("nccl",)
        assert any("nccl_version 2.26.2 -> 2.27.3" in r for r in i.reasons)
    head = [i for i in impacts.values() if i.role == "head"]
    assert head and all(not i.changed for i in head)  # the nccl role never runs on the head node


def test_a_slurm_bump_reaches_the_head_node_but_does_not_recertify_it() -> None:
    base = spec("local")
    impacts = by_node(plan_impacts(inputs(base), inputs(software(base, slurm="22.05.9"))))
    assert impacts["head-001"].actions() == ["configure"]
    assert impacts["node-001"].actions() == ["configure", "re-certify"]


def test_a_driver_bump_adds_a_reboot_where_the_kernel_module_is_managed() -> None:
    base = spec("prod", FLEET)
    impacts = plan_impacts(inputs(base), inputs(driver(base, "570.172.08")))
    compute = [i for i in impacts if i.role == "gpu"]
    assert all(i.actions() == ["configure", "reboot", "re-certify"] for i in compute)
    assert all("nvidia_driver" in i.configure for i in compute)


def test_containers_share_the_host_kernel_so_a_driver_bump_never_reboots_them() -> None:
    base = spec("local")
    impacts = plan_impacts(inputs(base), inputs(driver(base, "535.309.01")))
    compute = [i for i in impacts if i.role == "gpu"]
    assert compute and all(i.recertify and not i.reboot for i in compute)


def test_a_pool_count_change_creates_or_destroys_exactly_those_nodes() -> None:
    small, large = spec("prod", FLEET - 3), spec("prod", FLEET)
    grown = plan_impacts(inputs(small), inputs(large))
    created = sorted(i.node for i in grown if i.provision == "create")
    assert created == [f"gpu-{n:03d}" for n in range(FLEET - 2, FLEET + 1)]
    assert all(i.recertify and "nvidia_driver" in i.configure for i in grown if i.provision == "create")
    assert not any(i.provision in ("destroy", "replace") for i in grown)
    # slurm.conf lists every node: the others reconfigure Slurm, nothing more.
    kept = [i for i in grown if i.provision == "keep"]
    assert all(i.configure == ("slurm",) and not i.recertify for i in kept if i.role == "gpu")

    shrunk = plan_impacts(inputs(large), inputs(small))
    destroyed = sorted(i.node for i in shrunk if i.provision == "destroy")
    assert destroyed == created
    assert not any(i.provision == "create" for i in shrunk)


def test_an_instance_type_change_replaces_and_recertifies() -> None:
    base = spec("dev")
    pools = [
        p.model_copy(update={"instance_type": "p4d.24xlarge"}) if p.role == "gpu" else p
        for p in base.node_pools
    ]
    impacts = by_node(plan_impacts(inputs(base), inputs(base.model_copy(update={"node_pools": pools}))))
    gpu = impacts["gpu-001"]
    assert gpu.provision == "replace" and gpu.recertify and not gpu.reboot
    assert any("instance_type g5.xlarge -> p4d.24xlarge" in r for r in gpu.reasons)
    assert impacts["head-001"].provision == "keep"


def test_only_nodes_in_service_are_drained_and_their_jobs_named() -> None:
    base = spec("prod", FLEET)
    nodes = {}
    for k in range(1, FLEET + 1):
        name = f"gpu-{k:03d}"
        nodes[name] = LiveNode(name, serving=k % 2 == 0, jobs=(f"{k}",) if k % 4 == 0 else ())
    live = LiveState(nodes=nodes)
    impacts = by_node(plan_impacts(inputs(base), inputs(software(base, nccl="2.27.3")), live))
    assert impacts["gpu-002"].drain and impacts["gpu-002"].jobs == ()
    assert impacts["gpu-004"].drain and impacts["gpu-004"].jobs == ("4",)
    assert not impacts["gpu-001"].drain
    assert sum(i.drain for i in impacts.values()) == FLEET // 2


def test_a_configure_only_change_drains_nothing() -> None:
    small, large = spec("local", 3), spec("local", 4)
    live = LiveState(nodes={f"node-00{k}": LiveNode(f"node-00{k}", serving=True) for k in (1, 2, 3)})
    impacts = by_node(plan_impacts(inputs(small), inputs(large), live))
    assert impacts["node-001"].actions() == ["configure"]
    assert impacts["node-004"].provision == "create" and not impacts["node-004"].drain


def test_the_providers_steps_count_only_when_the_stack_is_up() -> None:
    base = inputs(spec("dev"))
    steps = {"gpu-001": "replace", "gpu-002": "create"}
    down = by_node(plan_impacts(base, base, LiveState(steps=steps)))
    assert not pending(list(down.values()))
    live = LiveState(nodes={"gpu-001": LiveNode("gpu-001", serving=True)}, steps=steps)
    up = by_node(plan_impacts(base, base, live))
    assert up["gpu-001"].provision == "replace" and up["gpu-001"].drain
    assert up["gpu-002"].provision == "create"
    assert not up["head-001"].changed


def test_a_node_without_a_recorded_converge_is_configured_whole() -> None:
    base = inputs(spec("local"))
    partial = StackInputs("journal", {k: v for k, v in base.nodes.items() if k != "node-002"})
    live = LiveState(nodes={"node-002": LiveNode("node-002")})
    impact = by_node(plan_impacts(partial, base, live))["node-002"]
    assert impact.provision == "keep" and impact.recertify
    assert set(impact.configure) >= {"slurm", "nvidia_driver"}


def test_certification_threshold_change_recertifies_without_configuring(tmp_path: Path) -> None:
    base = spec("local")
    profiles = dict(base.certification.profiles)
    profiles["local"] = profiles["local"].model_copy(update={"suite": "standard"})
    changed = base.model_copy(
        update={"certification": base.certification.model_copy(update={"profiles": profiles})}
    )
    impacts = by_node(plan_impacts(inputs(base), inputs(changed)))
    assert impacts["node-001"].actions() == ["re-certify"]
    assert not impacts["head-001"].changed
