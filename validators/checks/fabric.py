"""GPU interconnect and network fabric: NVLink links, GPU topology, EFA devices, InfiniBand ports."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from validators.checks.base import Check, Context
from validators.result import CheckResult, Outcome
from validators.runner import describe_failure

ALL = ("quick", "standard", "full")


def parse_nvlink_status(text: str) -> Dict[int, Dict[int, Optional[float]]]:
    """``nvidia-smi nvlink --status`` as GPU index -> link index -> GB/s (None when inactive).

    A view of the registered parser (validators/parsers/nvlink.py, tested on captures in
    tests/data/nvlink), kept for the checks that want a plain table.
    """
    from validators.parsers import PARSERS

    parsed = PARSERS["nvlink"](text)
    return {
        int(gpu["index"]): {int(i): (rate or None) for i, rate in gpu["links"].items()}
        for gpu in parsed.get("gpus") or []
    }


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


class InfinibandPorts(Check):
    id = "infiniband-ports"
    group = "preflight"
    profiles = ALL
    needs = ("infiniband",)
    measures = (
        "ibstat (else ibstatus): every InfiniBand port NODE.json infiniband expects is Active / LinkUp "
        "at infiniband.rate_gbps or faster, on the expected link layer"
    )

    def applies(self, config) -> Optional[str]:
        if not (config.ib_ports or config.ib_port_count):
            return (
                f"not applicable: NODE.json expects no InfiniBand port on {config.instance_type} "
                "(infiniband.ports and infiniband.count unset)"
            )
        return None

    def run(self, ctx: Context) -> CheckResult:
        from validators.parsers import PARSERS

        out = Outcome(self.id)
        cfg = ctx.config
        want = len(cfg.ib_ports) or cfg.ib_port_count
        out.limit("infiniband.count", want, "ports")
        if cfg.ib_rate_gbps:
            out.limit("infiniband.rate_gbps", cfg.ib_rate_gbps, "Gb/s")
        parsed: Dict[str, Any] = {}
        failures = []
        for tool in (
            "ibstat",
            "ibstatus",
        ):  # ibstatus (a script over sysfs) where ibstat is missing or reads nothing
            out.command([tool])
            rc, stdout, stderr = ctx.run([tool])
            parsed = PARSERS[tool](stdout + "\n" + stderr)
            if parsed.get("ports"):
                break
            failures.append(
                describe_failure([tool], rc, stdout, stderr) if rc else f"{tool}: {parsed['error']}"
            )
        ports: List[Dict[str, Any]] = list(parsed.get("ports") or [])
        if not ports:
            out.fail("; ".join(failures))
            return out.finish("")
        out.evidence(*[_port_line(p) for p in ports][:32], *list(parsed.get("errors") or [])[:4])
        by_name = {f"{p['device']}:{p['port']}": p for p in ports}
        expected = [name if ":" in name else f"{name}:1" for name in cfg.ib_ports]
        missing = [name for name in expected if name not in by_name]
        considered = [by_name[name] for name in expected if name in by_name] if expected else ports
        bad = [
            f"{p['device']}:{p['port']} {why}" for p in considered for why in [_port_problem(p, cfg)] if why
        ]
        good = len(considered) - len(bad)
        out.metric("ports_up", good, "ports")
        if missing:
            gone = "; ".join(parsed.get("errors") or [])[:160]
            out.fail(f"InfiniBand port(s) {', '.join(missing)} not listed" + (f" ({gone})" if gone else ""))
        for line in bad:
            out.fail(f"InfiniBand port {line}")
        if not expected and good < want:
            out.fail(f"{good} InfiniBand port(s) Active/LinkUp at the expected rate, expected {want}")
        rate = f" at {cfg.ib_rate_gbps:g} Gb/s" if cfg.ib_rate_gbps else ""
        return out.finish(f"{good} InfiniBand port(s) Active / LinkUp{rate}")


def _port_line(port: Dict[str, Any]) -> str:
    rate = port.get("rate_gbps")
    return (
        f"{port['device']}:{port['port']}: {port.get('state')} / {port.get('physical_state')}, "
        f"{'?' if rate is None else f'{rate:g}'} Gb/s, {port.get('link_layer')}"
    )


def _port_problem(port: Dict[str, Any], cfg) -> str:
    """Why a port is not fit (empty when it is): state, physical state, rate, link layer."""
    if port.get("state") != "Active" or port.get("physical_state") != "LinkUp":
        return f"is {port.get('state')} / {port.get('physical_state')}, expected Active / LinkUp"
    rate = port.get("rate_gbps")
    if cfg.ib_rate_gbps and (rate is None or rate < cfg.ib_rate_gbps):
        return f"runs at {rate if rate is not None else '?'} Gb/s, expected {cfg.ib_rate_gbps:g} (a degraded link)"
    layer = port.get("link_layer")
    if cfg.ib_link_layer and layer and layer.lower() != cfg.ib_link_layer.lower():
        return f"link layer is {layer}, expected {cfg.ib_link_layer}"
    return ""
