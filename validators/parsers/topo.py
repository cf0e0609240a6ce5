"""Parse `nvidia-smi topo -m`: the GPU/NIC connection matrix, CPU/NUMA affinity and the NIC legend.

The header row names the devices (GPU0.., then NIC0.. on recent drivers or the RDMA device itself,
`mlx5_0`, `rdmap16s27`, on older ones), followed by "CPU Affinity", "NUMA Affinity" and, on recent
drivers, "GPU NUMA ID". NIC rows carry no affinity columns. A "NIC Legend" maps NICn to the RDMA
device name; the connection "Legend" is ignored. Link kinds: X (self), NV<n> (n bonded NVLinks),
PIX, PXB, PHB, NODE, SYS (and the older SOC).

Output as it really arrives: drivers 590+ underline the header with terminal escape codes even when
writing to a file (`\t\x1b[4mGPU0\t...\x1b[0m`): they are stripped. A paste may indent rows or turn
the tabs into blanks; then an empty affinity cell (a cpuset without the GPU's CPUs) can no longer be
placed, so such a row's affinity is left unknown and the row is listed in `refused` with its line,
never read shifted. A matrix row with fewer cells than the header has devices is refused the same way.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from validators.parsers._common import strip_ansi

_GPU = re.compile(r"^GPU\d+$")
_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_TRAILER_WORDS = ("CPU", "NUMA", "GPU NUMA")


def _na(value: Optional[str]) -> Optional[str]:
    return None if value in (None, "N/A", "") else value


def _header_devices(line: str) -> Optional[List[str]]:
    """Device names of the header row, or None if `line` is not the header."""
    tokens = line.split()
    if not tokens or tokens[0] != "GPU0":
        return None
    if not line[:1].isspace() and len(tokens) > 1 and tokens[1] == "X":
        return None  # GPU0's own row ("GPU0  X  NV18 ..."); a header pasted without its leading tab has none
    devices: List[str] = []
    for token in tokens:
        if token in ("CPU", "NUMA", "Affinity", "ID") or token == "GPU" and devices:
            break
        devices.append(token)
    return devices


def _row_cells(line: str) -> List[str]:
    """Cells of a matrix row. nvidia-smi separates them with tabs and leaves an affinity cell empty when
    the caller's cpuset holds none of the GPU's CPUs ("NODE\t\t0\t\tN/A"), so a raw row is split on
    tabs to keep the empty cells in place; a copy whose tabs were expanded to blanks is split on blanks."""
    if "\t" in line:
        cells = [cell.strip() for cell in line.rstrip("\n").split("\t")]
        while cells and not cells[-1]:
            cells.pop()
        return cells
    return line.split()


def _trailer_columns(line: str) -> int:
    """How many affinity columns the header names (CPU Affinity, NUMA Affinity, GPU NUMA ID)."""
    return sum(
        1 for name in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID") if name in " ".join(line.split())
    )


def parse_nvidia_smi_topo(text: str) -> Dict[str, Any]:
    """Parse `nvidia-smi topo -m` output. See the package docstring for the fields."""
    devices: Optional[List[str]] = None
    trailer = 0
    matrix: Dict[str, Dict[str, str]] = {}
    affinity: Dict[str, Dict[str, Optional[str]]] = {}
    nic_names: Dict[str, str] = {}
    refused: List[Dict[str, Any]] = []
    for number, line in enumerate(strip_ansi(text).splitlines(), 1):
        legend = _LEGEND_ENTRY.match(line)
        if legend:
            nic_names[legend.group(1)] = legend.group(2)
            continue
        if devices is None:
            devices = _header_devices(line)
            trailer = _trailer_columns(line) if devices else 0
            continue
        tokens = _row_cells(line)
        if not tokens or tokens[0] not in devices:
            continue
        if len(tokens) < len(devices) + 1:
            refused.append(
                {
                    "line": number,
                    "text": line.strip(),
                    "why": f"{len(tokens) - 1} cells for {len(devices)} devices",
                }
            )
            continue
        row = tokens[0]
        matrix[row] = {device: tokens[i + 1] for i, device in enumerate(devices)}  # no zip(strict=): 3.9
        extra = tokens[len(devices) + 1 :]
        if _GPU.match(row):
            if "\t" not in line and trailer and len(extra) != trailer:
                # Blanks instead of tabs: an empty cell vanished, so which value is which is unknown.
                refused.append(
                    {
                        "line": number,
                        "text": line.strip(),
                        "why": f"{len(extra)} affinity cells for the header's {trailer} columns and no tabs "
                        "to place an empty one: affinity not read",
                    }
                )
                affinity[row] = {"cpu_affinity": None, "numa_affinity": None, "gpu_numa_id": None}
                continue
            later = [cell for cell in extra[2:] if cell]  # a double tab precedes "GPU NUMA ID"
            affinity[row] = {
                "cpu_affinity": _na(extra[0]) if len(extra) > 0 else None,
                "numa_affinity": _na(extra[1]) if len(extra) > 1 else None,
                "gpu_numa_id": _na(later[0]) if later else None,
            }
    devices = devices or []
    gpus = [d for d in devices if _GPU.match(d)]
    nic_labels = [d for d in devices if not _GPU.match(d)]

    def name(label: str) -> str:
        return nic_names.get(label, label)

    links = {g: {h: matrix.get(g, {}).get(h) for h in gpus if h != g} for g in gpus if g in matrix}
    nic_links = {g: {name(n): matrix.get(g, {}).get(n) for n in nic_labels} for g in gpus if g in matrix}
    result: Dict[str, Any] = {
        "gpus": gpus,
        "nics": [name(n) for n in nic_labels],
        "nic_labels": {n: name(n) for n in nic_labels},
        "links": links,
        "nic_links": nic_links,
        "affinity": affinity,
        "refused": refused,
        "error": None,
    }
    if not gpus or len(links) != len(gpus):
        result["error"] = "no complete GPU matrix in nvidia-smi topo -m output"
        cut = [r for r in refused if r["why"].endswith("devices")]
        if cut:
            result["error"] += f" (line {cut[0]['line']}: {cut[0]['why']}: {cut[0]['text']!r})"
    return result
