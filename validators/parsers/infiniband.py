"""Parse `ibstat` and `ibstatus` (linux-rdma/rdma-core infiniband-diags): one entry per HCA port.

ibstat prints, per CA (rdma-core infiniband-diags/ibstat.c):

    CA 'mlx5_0'
            CA type: MT4124
            Firmware version: 20.41.1000
            Port 1:
                    State: Active                 (Down, Initializing, Armed, Active)
                    Physical state: LinkUp        (Disabled, Polling, LinkUp, ...)
                    Rate: 200                     (Gb/s)
                    Link layer: InfiniBand        (or Ethernet: RoCE)

ibstatus (a script over /sys/class/infiniband) prints, per port:

    Infiniband device 'mlx5_0' port 1 status:
            state:           4: ACTIVE
            phys state:      5: LinkUp
            rate:            100 Gb/sec (4X EDR)
            link_layer:      InfiniBand

Both come out as the same port records, so a check reads either. `ibpanic:`/`ibwarn:` lines (a CA
that vanished, umad errors) are kept as errors: a port that cannot be read is not a healthy port.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from validators.parsers._common import strip_launcher_prefix, to_float

_CA = re.compile(r"^CA '([^']+)'")
_PORT = re.compile(r"^Port (\d+):$")
_FIELD = re.compile(r"^([A-Za-z][A-Za-z _]*?):\s*(.*?)$")
_DEVICE = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:")
_CODED = re.compile(r"^(\d+):\s*(\S+)")  # "4: ACTIVE", "5: LinkUp"
_RATE = re.compile(r"^([0-9.]+)\s*Gb/sec(?:\s*\(([0-9]+X)\s*([A-Z]+)\))?")
_DIAG = re.compile(r"^(ibpanic|ibwarn|iberror):\s*(.*)$")

# ibstatus prints the kernel's upper-case state; ibstat's words (rdma-core ibstat.c port_state_str)
_STATES = {
    "DOWN": "Down",
    "INIT": "Initializing",
    "ARMED": "Armed",
    "ACTIVE": "Active",
    "ACTIVE_DEFER": "Active",
}


def _port(device: str, number: int) -> Dict[str, Any]:
    return {
        "device": device,
        "port": number,
        "state": None,
        "physical_state": None,
        "rate_gbps": None,
        "width": None,
        "speed": None,
        "link_layer": None,
    }


def _finish(ports: List[Dict[str, Any]], errors: List[str], cas: List[Dict[str, Any]]) -> Dict[str, Any]:
    result: Dict[str, Any] = {"ports": ports, "errors": errors, "error": None}
    if cas:
        result["cas"] = cas
    if not ports:
        result["error"] = errors[0] if errors else "no InfiniBand port in the output"
    return result


def parse_ibstat(text: str) -> Dict[str, Any]:
    """Parse `ibstat` output. See the package docstring for the fields."""
    cas: List[Dict[str, Any]] = []
    ports: List[Dict[str, Any]] = []
    errors: List[str] = []
    port: Optional[Dict[str, Any]] = None
    for raw in text.splitlines():
        body = strip_launcher_prefix(raw).strip()
        if not body or body.startswith("#"):
            continue  # blank, or a note a person added to a paste
        diag = _DIAG.match(body)
        if diag:
            errors.append(body)
            continue
        match = _CA.match(body)
        if match:
            cas.append({"name": match.group(1), "type": None, "firmware": None, "ports": 0})
            port = None
            continue
        match = _PORT.match(body)
        if match and cas:
            port = _port(cas[-1]["name"], int(match.group(1)))
            ports.append(port)
            cas[-1]["ports"] += 1
            continue
        match = _FIELD.match(body)
        if not match or not cas:
            continue
        key, value = match.group(1).lower(), match.group(2).strip()
        if port is None:
            if key == "ca type":
                cas[-1]["type"] = value
            elif key == "firmware version":
                cas[-1]["firmware"] = value
        elif key == "state":
            port["state"] = value
        elif key == "physical state":
            port["physical_state"] = value
        elif key == "rate":
            port["rate_gbps"] = to_float(value)
        elif key == "link layer":
            port["link_layer"] = value
    return _finish(ports, errors, cas)


def parse_ibstatus(text: str) -> Dict[str, Any]:
    """Parse `ibstatus` output. See the package docstring for the fields."""
    ports: List[Dict[str, Any]] = []
    errors: List[str] = []
    port: Optional[Dict[str, Any]] = None
    for raw in text.splitlines():
        body = strip_launcher_prefix(raw).strip()
        if not body:
            continue
        diag = _DIAG.match(body)
        if diag:
            errors.append(body)
            continue
        match = _DEVICE.match(body)
        if match:
            port = _port(match.group(1), int(match.group(2)))
            ports.append(port)
            continue
        match = _FIELD.match(body)
        if not match or port is None:
            continue
        key, value = match.group(1).lower(), match.group(2).strip()
        if key == "state":
            coded = _CODED.match(value)
            word = coded.group(2) if coded else value
            port["state"] = _STATES.get(word.upper(), word)
        elif key in ("phys state", "physical state"):
            coded = _CODED.match(value)
            port["physical_state"] = coded.group(2) if coded else value
        elif key == "rate":
            rate = _RATE.match(value)
            if rate:
                port["rate_gbps"] = to_float(rate.group(1))
                port["width"], port["speed"] = rate.group(2), rate.group(3)
        elif key == "link_layer":
            port["link_layer"] = value
    return _finish(ports, errors, [])
