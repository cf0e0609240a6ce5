"""Parse `fi_info -p efa [-t FI_EP_RDM]` (libfabric): one block per provider/domain/endpoint type.

    provider: efa
        fabric: efa                 (older: EFA-fe80::...; libfabric 2.x adds `efa-direct`)
        domain: rdmap16s27-rdm      (older: efa_0-rdm; `-dgrm` for FI_EP_DGRAM)
        version: 111.20
        type: FI_EP_RDM
        protocol: FI_PROTO_EFA

The EFA device is the domain without its `-rdm`/`-dgrm` suffix; the device count is the number of
distinct such names among `efa` providers (so RDM, DGRAM, efa-direct and `efa;ofi_rxd` entries of one
device count once). `fi_getinfo: -61` means no matching provider (FI_ENODATA).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

from validators.parsers._common import strip_launcher_prefix

_FIELD = re.compile(r"^\s*(provider|fabric|domain|version|type|protocol):\s*(.*?)\s*$")
_GETINFO_ERROR = re.compile(r"fi_getinfo:\s*(-?\d+)")
_DOMAIN_SUFFIX = re.compile(r"-(?:rdm|dgrm|msg)$")


def parse_fi_info(text: str) -> Dict[str, Any]:
    """Parse fi_info output. See the package docstring for the fields."""
    providers: List[Dict[str, str]] = []
    for raw in text.splitlines():
        match = _FIELD.match(strip_launcher_prefix(raw))
        if not match:
            continue
        key, value = match.groups()
        if key == "provider":
            providers.append({"provider": value})
        elif providers:
            providers[-1][key] = value
    devices = sorted(
        {
            _DOMAIN_SUFFIX.sub("", p["domain"])
            for p in providers
            if "domain" in p and "efa" in p["provider"].split(";")
        },
        key=lambda name: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)],
    )
    error = _GETINFO_ERROR.search(text)
    result: Dict[str, Any] = {
        "providers": providers,
        "domains": sorted({p["domain"] for p in providers if "domain" in p}),
        "efa_devices": devices,
        "efa_device_count": len(devices),
        "rdm_domains": sorted(
            {
                p["domain"]
                for p in providers
                if p.get("type") == "FI_EP_RDM" and p["provider"] == "efa" and "domain" in p
            }
        ),
        "error": None,
    }
    if error and not providers:
        code = int(error.group(1))
        hint = " (FI_ENODATA: no matching provider; EFA absent or not set up)" if code == -61 else ""
        result["error"] = f"fi_getinfo: {code}{hint}"
    elif not providers:
        result["error"] = "fi_info printed no provider"
    return result
