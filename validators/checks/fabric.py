"""GPU interconnect and network fabric: NVLink links, GPU topology, EFA devices."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from validators.checks.base import Check, Context
from validators.result import CheckResult, Outcome
from validators.runner import describe_failure

ALL = ("quick", "standard", "full")

_GPU_RE = re.compile(r"^\s*GPU (\d+):\s*(.*)$")
_LINK_RE = re.compile(r"^\s*Link (\d+):\s*(.+?)\s*$")
_RATE_RE = re.compile(r"^([0-9.]+)\s*GB/s$")


def parse_nvlink_status(text: str) -> Dict[int, Dict[int, Optional[float]]]:
    """``nvidia-smi nvlink --status``: GPU index -> link index -> GB/s (None when inactive).

    Format (stas00/ml-engineering, network/debug): ``GPU 0: NVIDIA H100 80GB HBM3 (UUID: ...)``
    then ``Link 0: 26.562 GB/s`` per link, ``Link 5: <inactive>`` for a link that is down.
    Lines such as ``Link 0, P2P is supported: true`` (other subcommands) do not match.
    """
    gpus: Dict[int, Dict[int, Optional[float]]] = {}
    current: Optional[int] = None
    for line in text.splitlines():
        m = _GPU_RE.match(line)
        if m:
            current = int(m.group(1))
            gpus.setdefault(current, {})
            continue
        m = _LINK_RE.match(line)
        if m and current is not None:
            rate = _RATE_RE.match(m.group(2))
            gpus[current][int(m.group(1))] = float(rate.group(1)) if rate else None
    return gpus


class NvLink(Check):
    id = "nvlink"
    group = "preflight"
    profiles = ALL
    needs = ("gpu",)
    measures = (
        "NVLink links up per GPU = NODE.json gpu.nvlink_links_per_gpu (18 on H100/H200), all at the same rate"
    )

    def applies(self, config) -> Optional[str]:
        reason = super().applies(config)
        if reason:
            return reason
        if not config.nvlink_links_per_gpu:
            return f"not applicable: {config.instance_type} has no NVLink (gpu.nvlink_links_per_gpu = 0)"
        return None

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        want = ctx.config.nvlink_links_per_gpu
        out.limit("gpu.nvlink_links_per_gpu", want, "links")
        argv = ["nvidia-smi", "nvlink", "--status"]
        out.command(argv)
        rc, stdout, stderr = ctx.run(argv)
        if rc != 0:
            out.fail(describe_failure(argv, rc, stdout, stderr))
            return out.finish("")
        gpus = parse_nvlink_status(stdout)
        if len(gpus) != ctx.config.gpu_count:
            out.fail(f"nvidia-smi nvlink lists {len(gpus)} GPU(s), NODE.json expects {ctx.config.gpu_count}")
        fewest = None
        for index, links in sorted(gpus.items()):
            up = {i: r for i, r in links.items() if r is not None}
            fewest = len(up) if fewest is None else min(fewest, len(up))
            top = max(up.values()) if up else 0.0
            slow = sorted(i for i, r in up.items() if r < top)
            out.evidence(
                f"GPU {index}: {len(up)}/{len(links)} links up at {top:g} GB/s"
                + (f", slow: {slow}" if slow else "")
            )
            if len(up) < want:
                down = sorted(i for i, r in links.items() if r is None)
                out.fail(f"GPU {index}: {len(up)} NVLink links up, expected {want} (inactive: {down})")
            if slow:
                out.fail(f"GPU {index}: NVLink links {slow} below {top:g} GB/s (degraded)")
        out.metric("links_up_min", fewest, "links")
        return out.finish(f"{len(gpus)} GPU(s) with {want} NVLink links up each")


def _pairs(links: Any) -> Dict[str, Dict[str, str]]:
    """The topo parser's ``links`` as {gpu: {gpu: kind}} (accepts a list of {a, b, kind} too)."""
    if isinstance(links, dict):
        return {
            str(a): {str(b): str(k) for b, k in row.items()}
            for a, row in links.items()
            if isinstance(row, dict)
        }
    table: Dict[str, Dict[str, str]] = {}
    for item in links or []:
        if isinstance(item, dict):
            a, b = str(item.get("a") or item.get("from")), str(item.get("b") or item.get("to"))
            table.setdefault(a, {})[b] = str(item.get("kind") or item.get("link"))
    return table


class GpuTopology(Check):
    id = "gpu-topology"
    group = "preflight"
    profiles = ALL
    needs = ("gpu",)
    measures = "nvidia-smi topo -m: every GPU pair is connected by NVLink (NV#) on NVSwitch systems; the matrix is recorded"

    def applies(self, config) -> Optional[str]:
        reason = super().applies(config)
        if reason:
            return reason
        return None if config.gpu_count > 1 else "not applicable: a single GPU has no GPU-to-GPU links"

    def run(self, ctx: Context) -> CheckResult:
        from validators.parsers import PARSERS

        out = Outcome(self.id)
        argv = ["nvidia-smi", "topo", "-m"]
        out.command(argv)
        rc, stdout, stderr = ctx.run(argv)
        if rc != 0:
            out.fail(describe_failure(argv, rc, stdout, stderr))
            return out.finish("")
        parsed = PARSERS["nvidia-smi-topo"](stdout)
        gpus: List[str] = list(parsed.get("gpus") or [])
        table = _pairs(parsed.get("links"))
        out.metric("gpus_in_matrix", len(gpus), "count")
        if len(gpus) != ctx.config.gpu_count:
            out.fail(f"topology lists {len(gpus)} GPU(s), NODE.json expects {ctx.config.gpu_count}")
        not_nv = []
        for a in gpus:
            for b in gpus:
                if a == b:
                    continue
                kind = table.get(a, {}).get(b, "?")
                if not kind.upper().startswith("NV"):
                    not_nv.append(f"{a}-{b}:{kind}")
        out.evidence(*[line for line in stdout.splitlines() if line.strip()][: 2 + len(gpus)])
        if ctx.config.nvswitch and not_nv:
            out.fail(f"GPU pairs not on NVLink on an NVSwitch system: {', '.join(not_nv[:8])}")
        kinds = sorted({k for row in table.values() for k in row.values() if k != "X"})
        return out.finish(f"{len(gpus)} GPUs, link kinds {', '.join(kinds) or 'none'}")


class EfaDevices(Check):
    id = "efa-devices"
    group = "preflight"
    profiles = ALL
    needs = ("efa",)
    measures = "fi_info -p efa lists as many EFA devices as NODE.json efa.interfaces (the catalogue's count)"

    def applies(self, config) -> Optional[str]:
        if not config.efa_interfaces:
            return f"not applicable: {config.instance_type} has no EFA interfaces (efa.interfaces = 0)"
        return None

    def run(self, ctx: Context) -> CheckResult:
        from validators.parsers import PARSERS

        out = Outcome(self.id)
        want = ctx.config.efa_interfaces
        out.limit("efa.interfaces", want, "devices")
        argv = ["fi_info", "-p", "efa", "-t", "FI_EP_RDM"]
        out.command(argv)
        rc, stdout, stderr = ctx.run(argv)
        parsed = PARSERS["fi-info"](stdout + stderr)
        if rc != 0:
            reason = describe_failure(argv, rc, stdout, stderr)
            out.fail(reason + (f" ({parsed['error']})" if parsed.get("error") and rc != 127 else ""))
            return out.finish("")
        devices = efa_device_names(parsed)
        out.metric("efa_devices", len(devices), "devices")
        out.evidence(f"devices: {', '.join(devices) or 'none'}")
        if len(devices) != want:
            out.fail(f"fi_info lists {len(devices)} EFA device(s), expected {want}")
        return out.finish(f"{len(devices)} EFA devices")


def efa_device_names(parsed: Dict[str, Any]) -> List[str]:
    """Distinct EFA device (domain) names from the fi-info parser's output."""
    if isinstance(parsed.get("efa_devices"), list):
        return sorted(str(d) for d in parsed["efa_devices"])
    for key in ("devices", "domains"):
        if isinstance(parsed.get(key), list):
            return sorted(
                {d if isinstance(d, str) else str(d.get("domain") or d.get("name")) for d in parsed[key]}
            )
    names = set()
    for entry in parsed.get("providers") or parsed.get("entries") or []:
        if isinstance(entry, dict) and entry.get("domain"):
            names.add(re.sub(r"-(rdm|dgrm)$", "", str(entry["domain"])))
    return sorted(names)
