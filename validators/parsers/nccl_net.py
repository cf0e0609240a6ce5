"""Parse NCCL's `NCCL_DEBUG=INFO` log (NCCL_DEBUG_SUBSYS=INIT,NET is enough) for the network it used.

What each release prints (NVIDIA/nccl, aws/aws-ofi-nccl sources; captures in tests/data/nccl-net):

    NCCL INFO Using network AWS Libfabric        init.cc, every release: the net NCCL chose (also
                                                 "Libfabric" from aws-ofi-nccl 1.13, "Socket", "IB")
    NET/Plugin: Loaded net plugin AWS Libfabric (v6)
    NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: ...
    NET/Plugin : No plugin found, using internal implementation         (2.12-2.18; "(libnccl-net.so)." in 2.4)
    NET/Plugin: No plugin found (libnccl-net.so) / Using internal network plugin.       (2.21-2.22)
    NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.              (2.23 on)
    NET/OFI Initializing aws-ofi-nccl 1.9.1-aws  (1.7 on; "NET/OFI Using aws-ofi-nccl 1.6.0" before)
    NET/OFI Selected Provider is efa (found 4 nics)            (up to 1.13; no count in 1.4)
    NET/OFI Selected provider is efa, fabric is efa-direct (found 16 nics)   (1.14 on)
    NCCL WARN NET/OFI aws-ofi-nccl initialization failed

CollNet, tuner and profiler plugin lines ("Failed to find ncclCollNetPlugin_v8 symbol",
"PROFILER/Plugin: Could not find") are not about the net plugin and are ignored.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

# The names aws-ofi-nccl registers with NCCL (src/nccl_ofi_interface_nvidia.cpp; "AWS Libfabric" before 1.13).
OFI_NETWORKS = ("AWS Libfabric", "Libfabric")

_USING_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_LOADED = re.compile(r"NET/Plugin\s?:\s?Loaded net plugin (.+?) \(v(\d+)\)")
_LOAD_FAILED = re.compile(
    r"NET/Plugin\s?:\s?Plugin load(?: \(([^)]*)\))? returned (-?\d+)\s?:\s?(.*?)\.?\s*$"
)
_NOT_FOUND = re.compile(
    r"NET/Plugin\s?:\s?(?:dlerror=.*?)?(?:No plugin found(?: \(([^)]*)\))?|Could not find:\s?(\S+?)\.?(?:\s|$))"
)
_INTERNAL = re.compile(
    r"NET/Plugin\s?:\s?.*(?:using internal implementation|Using internal net(?:work)? plugin)"
)
# NCCL probes the newest API symbol first ("Failed to find ncclNetPlugin_v7 symbol." then loads v6):
# only the closing "Failed to find ncclNetPlugin symbol (...)" without a version means none fits.
_NO_NET_SYMBOL = re.compile(r"NET/Plugin\s?:\s?Failed to find ncclNetPlugin symbol\b")
_OFI_VERSION = re.compile(r"NET/OFI (?:Initializing|Using) aws-ofi-nccl (\S+)")
_PROVIDER = re.compile(
    r"NET/OFI Selected [Pp]rovider is ([^,\s(]+)(?:, fabric is ([^\s(]+))?(?: \(found (\d+) nics\))?"
)
_OFI_WARN = re.compile(r"NCCL WARN (NET/OFI .+?)\s*$")


def parse_nccl_net(text: str) -> Dict[str, Any]:
    """Parse an NCCL INFO log. Fields:

    networks        {name: lines}  every "Using network <name>" (one per communicator and rank)
    plugin          {name, api}|None   "NET/Plugin: Loaded net plugin <name> (v<api>)"
    ofi_version     str|None   aws-ofi-nccl's version as it prints it ("1.9.1-aws", "1.4.0aws")
    providers       {name: lines}  libfabric providers aws-ofi-nccl selected ("efa", "cxi", "tcp")
    fabrics         list[str]  "fabric is <name>" (1.14 on: "efa", "efa-direct")
    nics            int|None   the largest "(found N nics)"
    plugin_missing  list[str]  why NCCL did not load libnccl-net.so, as printed (distinct)
    ofi_errors      list[str]  distinct "NCCL WARN NET/OFI ..." messages
    ofi_used        bool       some "Using network" names the OFI plugin
    fallback        list[str]  the other networks used (Socket, IB)
    reasons         list[str]  why this log does not show aws-ofi-nccl on EFA (empty = it does)
    ok              bool       no reasons
    """
    networks: Dict[str, int] = {}
    providers: Dict[str, int] = {}
    fabrics: List[str] = []
    missing: List[str] = []
    ofi_errors: List[str] = []
    plugin = None
    version = None
    nics = None
    internal = False
    for line in text.splitlines():
        match = _USING_NETWORK.search(line)
        if match:
            networks[match.group(1)] = networks.get(match.group(1), 0) + 1
            continue
        match = _LOADED.search(line)
        if match:
            plugin = {"name": match.group(1), "api": int(match.group(2))}
            continue
        match = _LOAD_FAILED.search(line)
        if match:
            lib, code, why = match.groups()
            _add(missing, f"{lib or 'libnccl-net.so'}: load returned {code}: {why}")
            continue
        match = _NOT_FOUND.search(line)
        if match:
            name = match.group(1) or match.group(2) or "libnccl-net.so"
            if not any(m.startswith(name) for m in missing):
                _add(missing, f"{name}: not found")
            internal = internal or bool(_INTERNAL.search(line))
            continue
        if _INTERNAL.search(line):
            internal = True
            continue
        if _NO_NET_SYMBOL.search(line):
            _add(missing, "libnccl-net.so exports no ncclNetPlugin symbol this NCCL supports")
            continue
        match = _OFI_VERSION.search(line)
        if match:
            version = match.group(1)
            continue
        match = _PROVIDER.search(line)
        if match:
            providers[match.group(1)] = providers.get(match.group(1), 0) + 1
            if match.group(2) and match.group(2) not in fabrics:
                fabrics.append(match.group(2))
            if match.group(3):
                nics = max(nics or 0, int(match.group(3)))
            continue
        match = _OFI_WARN.search(line)
        if match:
            _add(ofi_errors, match.group(1))
    if internal and not missing:
        missing.append("libnccl-net.so: NCCL used its internal net plugin")
    ofi = [n for n in networks if n in OFI_NETWORKS]
    fallback = sorted(n for n in networks if n not in OFI_NETWORKS)
    reasons: List[str] = []
    if fallback:
        why = "; ".join(missing[:1] + ofi_errors[:1]) or "the log does not say why"
        reasons.append(f"NCCL used network {', '.join(fallback)}, not the OFI plugin ({why})")
    elif not networks:
        if plugin:
            pass  # loaded; what it was used for is in the lines this log lacks
        elif missing:
            reasons.append(f"aws-ofi-nccl was not loaded ({missing[0]})")
        elif ofi_errors:
            reasons.append(f"aws-ofi-nccl failed: {ofi_errors[0]}")
        reasons.append("no 'NCCL INFO Using network' line: the log does not show which network NCCL used")
    others = sorted(p for p in providers if p != "efa")
    if others:
        reasons.append(f"aws-ofi-nccl selected libfabric provider {', '.join(others)}, not efa")
    elif ofi and not providers:
        reasons.append("no 'NET/OFI Selected provider' line: the log does not show the libfabric provider")
    return {
        "networks": networks,
        "plugin": plugin,
        "ofi_version": version,
        "providers": providers,
        "fabrics": fabrics,
        "nics": nics,
        "plugin_missing": missing,
        "ofi_errors": ofi_errors,
        "ofi_used": bool(ofi),
        "fallback": fallback,
        "reasons": reasons,
        "ok": not reasons,
    }


def _add(items: List[str], item: str) -> None:
    if item not in items:
        items.append(item)
