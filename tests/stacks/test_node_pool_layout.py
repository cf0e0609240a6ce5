"""The EFA interface layout, as AWS documents it for multi-card instance types (efa-acc-inst-types)."""

from __future__ import annotations

import pytest
from components.node_pool import EFA_ONLY, ENA, InterfaceSlot, interface_layout

from clusterforge.catalog import load_hardware


@pytest.mark.parametrize("name", [n for n in load_hardware().names("aws") if load_hardware()[n].has_efa])
def test_every_efa_type_gets_primary_ena_and_its_efa_count(name: str):
    net = load_hardware()[name].network
    slots = interface_layout(net.efa_interfaces, net.network_cards)
    assert slots[0] == InterfaceSlot(0, 0, ENA)
    efa = slots[1:]
    assert len(efa) == net.efa_interfaces and all(s.interface_type == EFA_ONLY for s in efa)
    assert len({(s.network_card_index, s.device_index) for s in slots}) == len(slots)  # no slot used twice
    assert efa[0] == InterfaceSlot(0, 1, EFA_ONLY)
    assert all(s.network_card_index < net.network_cards for s in efa)


def test_p4d_layout_exactly():
    assert interface_layout(4, 4) == [
        InterfaceSlot(0, 0, ENA),
        InterfaceSlot(0, 1, EFA_ONLY),
        InterfaceSlot(1, 0, EFA_ONLY),
        InterfaceSlot(2, 0, EFA_ONLY),
        InterfaceSlot(3, 0, EFA_ONLY),
    ]


def test_no_efa_is_one_ena_interface():
    assert interface_layout(0, 1) == [InterfaceSlot(0, 0, ENA)]


def test_more_efa_than_slots_is_refused():
    with pytest.raises(ValueError, match="do not fit"):
        interface_layout(3, 1)
