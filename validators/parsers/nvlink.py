"""Parse `nvidia-smi nvlink --status` (short `-s`): per GPU, per link, the link's speed or `<inactive>`.

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
             Link 0: 26.562 GB/s
             Link 4: <inactive>

(H100/H200: 18 links at 26.562 GB/s; A100: 12 at 25 GB/s; V100: 6 at 25.781 GB/s; REFERENCE.md.) A
link printing 0 GB/s is not up. Lines of other nvlink subcommands ("Link 0, P2P is supported: true",
"Link 0: Remote Device ...", "Link 0: Replay Errors: 0") and elisions a person left in a paste
("[...]", "......") are not links. nvidia-smi's own failure ("NVIDIA-SMI has failed ...", "Failed to
initialize NVML: ...") becomes `error`.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from validators.parsers._common import strip_ansi, strip_launcher_prefix, to_float

_GPU = re.compile(r"^GPU (\d+):\s*(.*)$")
_UUID = re.compile(r"^(.*?)\s*\(UUID:\s*([^)]*)\)\s*(.*)$")
_LINK = re.compile(r"^Link (\d+):\s*(?:([0-9.]+)\s*GB/s|(<inactive>))\s*$")
_FAILURE = re.compile(r"(NVIDIA-SMI has failed.*|Failed to initialize NVML.*|No devices were found)")


def parse_nvlink_status(text: str) -> Dict[str, Any]:
    """Parse nvidia-smi nvlink --status output. See the package docstring for the fields."""
    text = strip_ansi(text)  # a terminal's colours and underlines (validators/parsers/_common.py)
    gpus: List[Dict[str, Any]] = []
    current: Optional[Dict[str, Any]] = None
    failure: Optional[str] = None
    for raw in text.splitlines():
        body = strip_launcher_prefix(raw).strip()
        if not body:
            continue
        found = _FAILURE.search(body)
        if found and failure is None:
            failure = found.group(1).strip()
        match = _GPU.match(body)
        if match:
            rest = match.group(2).strip()
            named = _UUID.match(rest)
            name, uuid, note = named.groups() if named else (rest, "", "")
            current = {
                "index": int(match.group(1)),
                "name": name.strip() or None,
                "uuid": uuid.strip() or None,
                "note": note.strip() or None,  # e.g. "Device does not have or support Nvlink"
                "links": {},
            }
            gpus.append(current)
            continue
        match = _LINK.match(body)
        if match and current is not None:
            rate = to_float(match.group(2)) if match.group(2) else None
            current["links"][str(int(match.group(1)))] = rate
    for gpu in gpus:
        links = gpu["links"]
        gpu["links_up"] = sum(1 for rate in links.values() if rate)
        gpu["inactive"] = sorted(int(i) for i, rate in links.items() if not rate)
        up = [rate for rate in links.values() if rate]
        gpu["max_gbps"] = max(up) if up else None
    error = failure if failure else (None if gpus else "nvidia-smi nvlink printed no GPU")
    return {"gpus": gpus, "error": error}
