"""Parse `nvidia-smi -q` (text) and `nvidia-smi -q -x` (XML), drivers 470 to 570.

Differences handled: "Clocks Throttle Reasons" (<= 525) vs "Clocks Event Reasons" (>= 535) and the
matching XML tags; a whole section printed as `N/A` ("Remapped Rows : N/A" on pre-Ampere GPUs, on
MIG-enabled GPUs in XML) or missing; the old ECC layout (Single/Double Bit with per-memory counters
and a Total) vs the Ampere layout (SRAM/DRAM Correctable/Uncorrectable, with Parity/SEC-DED split in
550+); excerpts with `[...]` elisions. nvidia-smi's own failure messages land in `error`.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Optional, Tuple

from validators.parsers._common import strip_ansi

_FAILURES = re.compile(
    r"NVIDIA-SMI has failed[^\n]*|Failed to initialize NVML[^\n]*|No devices were found[^\n]*"
    r"|Unable to determine the device handle[^\n]*|Driver/library version mismatch[^\n]*"
)
_GPU_HEADER = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KEY_VALUE = re.compile(r"^(\S.*?)\s+:(?:\s(.*))?$")

# XML tag suffix -> the label the text format prints (so both formats name reasons alike).
_REASON_LABELS = {
    "gpu_idle": "Idle",
    "applications_clocks_setting": "Applications Clocks Setting",
    "sw_power_cap": "SW Power Cap",
    "hw_slowdown": "HW Slowdown",
    "hw_thermal_slowdown": "HW Thermal Slowdown",
    "hw_power_brake_slowdown": "HW Power Brake Slowdown",
    "sync_boost": "Sync Boost",
    "sw_thermal_slowdown": "SW Thermal Slowdown",
    "display_clocks_setting": "Display Clock Setting",
}

Node = Dict[str, Any]
_NOT_AVAILABLE = frozenset(
    ("", "N/A", "[N/A]", "Unknown Error", "[Unknown Error]", "Not Found", "Not Supported", "[Not Supported]")
)


def _na(value: Optional[str]) -> bool:
    # "Not Found": CUDA Version when no CUDA driver library is visible (580 in a vGPU guest)
    return not isinstance(value, str) or value.strip() in _NOT_AVAILABLE


def _int(value: Optional[str]) -> Optional[int]:
    if _na(value):
        return None
    match = re.match(r"\s*(\d+)", value or "")
    return int(match.group(1)) if match else None


def _yes_no(value: Optional[str]) -> Optional[bool]:
    if _na(value):
        return None
    text = (value or "").strip().lower()
    if text in ("yes", "enabled", "active", "on"):
        return True
    if text in ("no", "disabled", "not active", "off"):
        return False
    return None


def _sum(values: List[Optional[int]]) -> Optional[int]:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _gpu_record(
    bus_id: Optional[str],
    name: Optional[str],
    persistence: Optional[str],
    ecc: Tuple[List, List],
    remap: Tuple[Optional[str], Optional[str]],
    retired_pending: Optional[str],
    pcie: Tuple[Optional[str], Optional[str], Optional[str], Optional[str]],
    throttle: Optional[List[str]],
    uuid: Optional[str],
    serial: Optional[str] = None,
) -> Node:
    return {
        "bus_id": bus_id,
        "name": name,
        "uuid": uuid,
        # The board's serial ("N/A" on GeForce): with the UUID, what identifies a GPU handed back.
        "serial": None if _na(serial) else serial,
        "persistence_mode": _yes_no(persistence),
        "ecc_uncorrected_volatile": _sum(ecc[0]),
        "ecc_corrected_volatile": _sum(ecc[1]),
        "remapped_rows_pending": _yes_no(remap[0]),
        "remapped_rows_failure": _yes_no(remap[1]),
        "retired_pages_pending": _yes_no(retired_pending),
        "pcie_gen_current": _int(pcie[0]),
        "pcie_gen_max": _int(pcie[1]),
        "pcie_width_current": _int(pcie[2]),
        "pcie_width_max": _int(pcie[3]),
        "throttle_active": throttle,
    }


# ---------------------------------------------------------------- text (-q)


def _tree(lines: List[str]) -> Node:
    """Indentation -> nested dicts. A `Key : Value` line never opens a level: deeper lines under it
    (HW Thermal Slowdown under HW Slowdown) belong to the enclosing section."""
    root: Node = {}
    stack: List[Tuple[int, Node]] = [(-1, root)]
    for line in lines:
        if not line.strip() or line.strip() == "[...]":
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack[-1][0] >= indent:
            stack.pop()
        node = stack[-1][1]
        body = line.strip()
        match = _KEY_VALUE.match(body)
        if match:
            node.setdefault(match.group(1), (match.group(2) or "").strip())
        else:
            child: Node = {}
            node.setdefault(body, child)
            stack.append((indent, child))
    return root


def _find(node: Any, *path: str) -> Any:
    """Walk `path`; each step may list alternatives separated by '|' (first present wins)."""
    for step in path:
        if not isinstance(node, dict):
            return None
        node = next((node[alt] for alt in step.split("|") if alt in node), None)
    return node


def _leaf(node: Any, *path: str) -> Optional[str]:
    """`_find` for a value: a key cut off in the middle of its line reads as a section, not a string."""
    value = _find(node, *path)
    return value if isinstance(value, str) else None


def _ecc_text(gpu: Node) -> Tuple[List[Optional[int]], List[Optional[int]]]:
    volatile = _find(gpu, "ECC Errors", "Volatile")
    if not isinstance(volatile, dict):
        return [], []
    if "Double Bit" in volatile or "Single Bit" in volatile:  # pre-Ampere layout
        return [_int(_leaf(volatile, "Double Bit", "Total"))], [_int(_leaf(volatile, "Single Bit", "Total"))]
    uncorrected = [_int(v) for k, v in volatile.items() if "Uncorrectable" in k and isinstance(v, str)]
    corrected = [
        _int(v)
        for k, v in volatile.items()
        if k.endswith("Correctable") and "Un" not in k and isinstance(v, str)
    ]
    return uncorrected, corrected


def _throttle_text(gpu: Node) -> Optional[List[str]]:
    section = _find(gpu, "Clocks Event Reasons|Clocks Throttle Reasons")
    if not isinstance(section, dict):
        return None  # absent, or printed as "N/A"
    return [name for name, value in section.items() if isinstance(value, str) and _yes_no(value) is True]


def _parse_text(text: str) -> Node:
    header: List[str] = []
    gpus: List[Tuple[str, List[str]]] = []
    for line in text.splitlines():
        match = _GPU_HEADER.match(line)
        if match:
            gpus.append((match.group(1), []))
        elif gpus and (line.startswith(" ") or not line.strip()):
            gpus[-1][1].append(line)
        elif not gpus or not line.startswith(" "):
            header.append(line)
    top = _tree(header)
    parsed = []
    for bus_id, lines in gpus:
        gpu = _tree(lines)
        remap = _find(gpu, "Remapped Rows")
        retired = _find(gpu, "Retired Pages|Retired pages")
        link = _find(gpu, "PCI", "GPU Link Info")
        parsed.append(
            _gpu_record(
                bus_id=bus_id,
                name=_leaf(gpu, "Product Name"),
                persistence=_leaf(gpu, "Persistence Mode"),
                ecc=_ecc_text(gpu),
                remap=(_leaf(remap, "Pending"), _leaf(remap, "Remapping Failure Occurred"))
                if isinstance(remap, dict)
                else (None, None),
                retired_pending=_leaf(retired, "Pending Page Blacklist|Pending Page Retirement|Pending")
                if isinstance(retired, dict)
                else None,
                pcie=(
                    _leaf(link, "PCIe Generation", "Current"),
                    _leaf(link, "PCIe Generation", "Max"),
                    _leaf(link, "Link Width", "Current"),
                    _leaf(link, "Link Width", "Max"),
                ),
                throttle=_throttle_text(gpu),
                uuid=_leaf(gpu, "GPU UUID"),
                serial=_leaf(gpu, "Serial Number"),
            )
        )
    return {
        "format": "text",
        "driver_version": None if _na(_leaf(top, "Driver Version")) else _leaf(top, "Driver Version"),
        "cuda_version": None if _na(_leaf(top, "CUDA Version")) else _leaf(top, "CUDA Version"),
        "attached_gpus": _int(_leaf(top, "Attached GPUs")),
        "gpus": parsed,
    }


# ---------------------------------------------------------------- XML (-q -x)


def _xtext(elem: Optional[ET.Element], path: str) -> Optional[str]:
    if elem is None:
        return None
    found = elem.find(path)
    return None if found is None or found.text is None else found.text.strip()


def _parse_xml(root: ET.Element) -> Node:
    gpus = []
    for gpu in root.findall("gpu"):
        volatile = gpu.find("ecc_errors/volatile")
        uncorrected: List[Optional[int]] = []
        corrected: List[Optional[int]] = []
        if volatile is not None:
            if volatile.find("double_bit") is not None:  # pre-Ampere layout
                uncorrected = [_int(_xtext(volatile, "double_bit/total"))]
                corrected = [_int(_xtext(volatile, "single_bit/total"))]
            else:
                for child in volatile:
                    if "uncorrectable" in child.tag:
                        uncorrected.append(_int(child.text))
                    elif child.tag.endswith("_correctable"):
                        corrected.append(_int(child.text))
        reasons = gpu.find("clocks_event_reasons")
        if reasons is None:
            reasons = gpu.find("clocks_throttle_reasons")
        throttle: Optional[List[str]] = None
        if reasons is not None and len(reasons):
            throttle = []
            for child in reasons:
                suffix = re.sub(r"^clocks_(?:event|throttle)_reason_", "", child.tag)
                if _yes_no(child.text) is True:
                    throttle.append(_REASON_LABELS.get(suffix, suffix))
        link = gpu.find("pci/pci_gpu_link_info")
        gpus.append(
            _gpu_record(
                bus_id=gpu.get("id") or _xtext(gpu, "pci/pci_bus_id"),
                name=_xtext(gpu, "product_name"),
                persistence=_xtext(gpu, "persistence_mode"),
                ecc=(uncorrected, corrected),
                remap=(
                    _xtext(gpu, "remapped_rows/remapped_row_pending"),
                    _xtext(gpu, "remapped_rows/remapped_row_failure"),
                ),
                retired_pending=_xtext(gpu, "retired_pages/pending_blacklist")
                or _xtext(gpu, "retired_pages/pending_retirement"),
                pcie=(
                    _xtext(link, "pcie_gen/current_link_gen"),
                    _xtext(link, "pcie_gen/max_link_gen"),
                    _xtext(link, "link_widths/current_link_width"),
                    _xtext(link, "link_widths/max_link_width"),
                ),
                throttle=throttle,
                uuid=_xtext(gpu, "uuid"),
                serial=_xtext(gpu, "serial"),
            )
        )
    driver = _xtext(root, "driver_version")
    cuda = _xtext(root, "cuda_version")
    return {
        "format": "xml",
        "driver_version": None if _na(driver) else driver,
        "cuda_version": None if _na(cuda) else cuda,
        "attached_gpus": _int(_xtext(root, "attached_gpus")),
        "gpus": gpus,
    }


def parse_nvidia_smi(text: str) -> Dict[str, Any]:
    """Parse `nvidia-smi -q` or `nvidia-smi -q -x` output. See the package docstring for the fields."""
    text = strip_ansi(text)  # a terminal's colours and underlines (validators/parsers/_common.py)
    failure = _FAILURES.search(text)
    # nvidia-smi prints a GPU it cannot reach ("Unable to determine the device handle for GPU1: ...") before
    # the document and goes on with the others, so the XML may not start the text
    start = min((i for i in (text.find("<?xml"), text.find("<nvidia_smi_log")) if i >= 0), default=-1)
    stripped = text[start:] if start >= 0 else text.lstrip()
    result: Node
    if start >= 0:
        try:
            result = _parse_xml(ET.fromstring(stripped))
        except ET.ParseError as exc:
            result = {
                "format": "xml",
                "driver_version": None,
                "cuda_version": None,
                "attached_gpus": None,
                "gpus": [],
                "error": f"unreadable nvidia-smi XML: {exc}",
            }
    else:
        result = _parse_text(text)
    if not result["gpus"] and "error" not in result:
        # never let an empty or unexpected output read as "no problems": say what was seen
        result["error"] = failure.group(0).strip() if failure else "nvidia-smi printed no GPU section"
    result.setdefault("error", None)
    # every failure line, also when other GPUs were read: a GPU that fell off the bus shows only here
    result["failures"] = [match.group(0).strip() for match in _FAILURES.finditer(text)]
    return result
