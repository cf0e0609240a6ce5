"""The `dev` example (2 x g5.xlarge, no EFA, NAT egress, an admin CIDR) under Pulumi's mocks."""

from __future__ import annotations

import pulumi

from clusterforge.catalog import load_hardware
from clusterforge.providers.aws import policy as p
from tests.stacks.harness import load_example, program


@pulumi.runtime.test
def test_dev_interfaces_follow_the_catalogue():
    async def check():
        spec = load_example("dev")
        graph = await program(spec)
        hw = load_hardware()
        for pool in spec.node_pools:
            (lt,) = [r for r in graph.of(p.LAUNCH_TEMPLATE) if r.name == f"dev-{pool.name}"]
            nics = lt.inputs["networkInterfaces"]
            net = hw[pool.instance_type].network
            assert len(nics) == 1 + net.efa_interfaces
            assert [n["interfaceType"] for n in nics] == ["interface"] + ["efa-only"] * net.efa_interfaces
        gpu = [i for i in graph.of(p.INSTANCE) if i.inputs["tags"]["clusterforge:pool"] == "gpu"]
        assert sorted(i.name for i in gpu) == ["gpu-001", "gpu-002"]
        assert not graph.of(p.PLACEMENT_GROUP)  # dev asks for none, and has no EFA

    return check()


@pulumi.runtime.test
def test_dev_ssh_only_from_the_admin_cidr_and_only_on_the_head():
    async def check():
        spec = load_example("dev")
        graph = await program(spec)
        ssh = [r for r in graph.of(p.INGRESS) if r.inputs.get("fromPort") == 22]
        assert [(r.inputs["cidrIpv4"], r.inputs["toPort"]) for r in ssh] == [("203.0.113.0/24", 22)]
        admin_sg = ssh[0].inputs["securityGroupId"]
        with_admin = [
            lt.name
            for lt in graph.of(p.LAUNCH_TEMPLATE)
            if admin_sg in lt.inputs["networkInterfaces"][0]["securityGroups"]
        ]
        assert with_admin == ["dev-head"]
        assert [r for r in graph.resources if r.type == "aws:ec2/natGateway:NatGateway"]
        assert not graph.of(p.LUSTRE)

    return check()


@pulumi.runtime.test
def test_capacity_block_sets_market_type_and_target():
    async def check():
        spec = load_example("prod")
        pools = [
            pool.model_copy(
                update={"capacity_reservation_id": None, "capacity_block_id": "cr-0123456789abcdef0"}
            )
            if pool.role == "gpu"
            else pool
            for pool in spec.node_pools
        ]
        graph = await program(spec.model_copy(update={"node_pools": pools}))
        (lt,) = [r for r in graph.of(p.LAUNCH_TEMPLATE) if r.name == "prod-gpu"]
        assert lt.inputs["instanceMarketOptions"]["marketType"] == "capacity-block"
        target = lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"]
        assert target["capacityReservationId"] == "cr-0123456789abcdef0"

    return check()
