"""NODE.json: load and validate (stdlib only). The schema is documented in SCHEMA.md.

Errors name the file, the key path, the bad value and the fix, with a did-you-mean for a
misspelt key; the CLI turns them into exit code 2.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from validators.profiles import DEFAULT_DURATIONS, DEFAULT_SIZES, DEFAULT_SWEEPS, DEFAULT_THRESHOLDS

SCHEMA_VERSION = 1

_TOP_KEYS = {
    "schema_version": "int, required: 1",
    "node": "str, required: this node's name",
    "instance_type": "str, required",
    "gpu": "object: count, model, nvlink_links_per_gpu, nvswitch",
    "efa": "object: interfaces",
    "infiniband": "object: ports, count, rate_gbps, link_layer",
    "software": "object: component -> pinned version",
    "packages": "object: component -> list of package names (dpkg/rpm glob patterns)",
    "pins": "list of {package, version, held}: packages the roles pinned and held",
    "shared_storage": "object: path, require_mount",
    "peers": "list of {name, address}",
    "durations": "object: name -> seconds or count",
    "sizes": "object: name -> bytes / dimension / count",
    "thresholds": "object: key -> number",
    "nccl": "object: tests_dir, collectives, multi_node_collectives, launcher, pairwise",
    "limits": "object: memlock_kib",
    "gpu_burn": "object: path",
    "skip_checks": "list of check ids",
}
_GPU_KEYS = ("count", "model", "nvlink_links_per_gpu", "nvswitch")
_NCCL_KEYS = ("tests_dir", "collectives", "multi_node_collectives", "launcher", "pairwise", "port")
_IB_PORT = re.compile(r"^[A-Za-z0-9_.-]+(?::\d+)?$")
_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
# What nccl-single-node runs when NODE.json names no nccl.collectives (the catalogue has a floor for each).
DEFAULT_COLLECTIVES = _COLLECTIVES[:4]


class ConfigError(Exception):
    """NODE.json is unreadable or invalid; the message says what to change."""


@dataclass(frozen=True)
class Peer:
    name: str
    address: str


@dataclass(frozen=True)
class Pin:
    """A package configure installed and held. ``version``: the Debian version, a glob as apt
    takes it (``535.261.03-*``); empty: any version."""

    package: str
    version: str
    held: bool


@dataclass
class NodeConfig:
    """What the node is expected to be, with the profile's defaults filled in."""

    node: str
    instance_type: str
    gpu_count: int = 0
    gpu_model: Optional[str] = None
    nvlink_links_per_gpu: int = 0
    nvswitch: bool = False
    efa_interfaces: int = 0
    ib_ports: List[str] = field(default_factory=list)  # "mlx5_0" or "mlx5_0:1"
    ib_port_count: int = 0
    ib_rate_gbps: Optional[float] = None
    ib_link_layer: Optional[str] = None
    software: Dict[str, str] = field(default_factory=dict)
    packages: Dict[str, List[str]] = field(default_factory=dict)
    pins: List[Pin] = field(default_factory=list)
    shared_storage_path: Optional[str] = None
    shared_storage_require_mount: bool = True
    peers: List[Peer] = field(default_factory=list)
    durations: Dict[str, float] = field(default_factory=dict)
    sizes: Dict[str, int] = field(default_factory=dict)
    sweeps: Dict[str, List[int]] = field(default_factory=dict)  # list-valued sizes, e.g. gloo_sweep_bytes
    thresholds: Dict[str, float] = field(default_factory=dict)
    nccl_tests_dir: str = ""
    nccl_collectives: List[str] = field(default_factory=lambda: list(DEFAULT_COLLECTIVES))
    # nccl-multi-node's collectives, run one after the other across the group (all_reduce when absent)
    nccl_multi_node_collectives: List[str] = field(default_factory=lambda: ["all_reduce"])
    nccl_launcher: List[str] = field(default_factory=list)
    nccl_pairwise: bool = False
    gloo_port: int = 29511
    memlock_kib: Optional[str] = None
    gpu_burn_path: Optional[str] = None
    skip_checks: List[str] = field(default_factory=list)
    source: str = "NODE.json"

    @property
    def has_gpu(self) -> bool:
        return self.gpu_count > 0

    def duration(self, name: str) -> float:
        return float(self.durations[name])

    def size(self, name: str) -> int:
        return int(self.sizes[name])

    def sweep(self, name: str) -> List[int]:
        return list(self.sweeps[name])

    def threshold(self, key: str) -> Optional[float]:
        return self.thresholds.get(key)


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None


def load_config(path: str, profile: str, peers_file: Optional[str] = None) -> NodeConfig:
    """Read and validate ``path``; fill defaults from ``profile``. ``peers_file``: a JSON list of
    ``{name, address}``, every member of a multi-node group, this node among them; the others
    become the peers (instead of NODE.json's own ``peers``). One such file serves a whole group, so
    a group of N nodes is sent N entries, not N NODE.json files of N - 1 peers each."""
    cfg = parse_config(_read_json(path), profile, source=path)
    if peers_file is not None:
        cfg.peers = group_peers(_read_json(peers_file), cfg.node, peers_file)
    return cfg


def group_peers(members: Any, node: str, source: str = "peers file") -> List[Peer]:
    """The other members of a group, from its member list (which must hold ``node``)."""
    v = _Validator(source)
    if not isinstance(members, list):
        raise ConfigError(f'{source}: must be a list of {{"name", "address"}} objects, one per group member')
    peers, found = [], False
    for i, m in enumerate(members):
        if not isinstance(m, dict):
            raise ConfigError(f"{source}: [{i}]: must be an object with name and address")
        v.known_keys(m, {"name": "", "address": ""}, f"[{i}].")
        peer = Peer(v.string(m, "name", f"[{i}].", True), v.string(m, "address", f"[{i}].", True))
        if peer.name == node:
            found = True
        else:
            peers.append(peer)
    if not found:
        names = ", ".join(str(m.get("name")) for m in members)
        raise ConfigError(f"{source}: {node!r} is not a member of this group (members: {names})")
    return peers


def parse_config(data: Any, profile: str, source: str = "NODE.json") -> NodeConfig:
    v = _Validator(source)
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a JSON object, got {type(data).__name__}")
    v.known_keys(data, _TOP_KEYS, "")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ConfigError(
            f"{source}: schema_version: got {version!r}, this suite reads {SCHEMA_VERSION}; "
            "re-render NODE.json with a matching clusterforge"
        )
    cfg = NodeConfig(
        node=v.string(data, "node", required=True),
        instance_type=v.string(data, "instance_type", required=True),
        source=source,
    )
    gpu = v.obj(data, "gpu")
    v.known_keys(gpu, {k: "" for k in _GPU_KEYS}, "gpu.")
    cfg.gpu_count = v.integer(gpu, "count", "gpu.", minimum=0, default=0)
    cfg.gpu_model = v.string(gpu, "model", "gpu.") or None
    cfg.nvlink_links_per_gpu = v.integer(gpu, "nvlink_links_per_gpu", "gpu.", minimum=0, default=0)
    cfg.nvswitch = v.boolean(gpu, "nvswitch", "gpu.", default=False)
    if cfg.gpu_count and not cfg.gpu_model:
        raise ConfigError(f'{source}: gpu.model: required when gpu.count > 0 (e.g. "H100")')
    efa = v.obj(data, "efa")
    v.known_keys(efa, {"interfaces": ""}, "efa.")
    cfg.efa_interfaces = v.integer(efa, "interfaces", "efa.", minimum=0, default=0)
    _infiniband(v, v.obj(data, "infiniband"), cfg)
    cfg.software = {k: v.version(val, f"software.{k}") for k, val in v.obj(data, "software").items()}
    for comp, pkgs in v.obj(data, "packages").items():
        if not (isinstance(pkgs, list) and pkgs and all(isinstance(p, str) and p for p in pkgs)):
            raise ConfigError(f"{source}: packages.{comp}: must be a non-empty list of package names")
        cfg.packages[comp] = list(pkgs)
    cfg.pins = _pins(v, data.get("pins", []))
    storage = v.obj(data, "shared_storage")
    v.known_keys(storage, {"path": "", "require_mount": ""}, "shared_storage.")
    cfg.shared_storage_path = v.string(storage, "path", "shared_storage.") or None
    cfg.shared_storage_require_mount = v.boolean(storage, "require_mount", "shared_storage.", default=True)
    cfg.peers = _peers(v, data.get("peers", []), cfg.node)
    cfg.durations = _numbers(v, data, "durations", DEFAULT_DURATIONS[profile], allow_new=True)
    sizes = dict(v.obj(data, "sizes"))
    v.known_keys(sizes, {k: "" for k in [*DEFAULT_SIZES[profile], *DEFAULT_SWEEPS[profile]]}, "sizes.")
    cfg.sweeps = {
        name: _sweep(v, sizes.pop(name), f"sizes.{name}") if name in sizes else list(default)
        for name, default in DEFAULT_SWEEPS[profile].items()
    }
    cfg.sizes = {k: int(n) for k, n in _numbers(v, {"sizes": sizes}, "sizes", DEFAULT_SIZES[profile]).items()}
    cfg.thresholds = _numbers(v, data, "thresholds", DEFAULT_THRESHOLDS, allow_new=True)
    nccl = v.obj(data, "nccl")
    v.known_keys(nccl, {k: "" for k in _NCCL_KEYS}, "nccl.")
    cfg.nccl_tests_dir = v.string(nccl, "tests_dir", "nccl.") or ""
    collectives = nccl.get("collectives", cfg.nccl_collectives)
    for c in collectives if isinstance(collectives, list) else [collectives]:
        if c not in _COLLECTIVES:
            raise ConfigError(f"{source}: nccl.collectives: {c!r} is not one of {', '.join(_COLLECTIVES)}")
    cfg.nccl_collectives = list(collectives)
    multi = nccl.get("multi_node_collectives", cfg.nccl_multi_node_collectives)
    if not (isinstance(multi, list) and multi and all(c in _COLLECTIVES for c in multi)):
        raise ConfigError(
            f"{source}: nccl.multi_node_collectives: {multi!r}: a non-empty list of {', '.join(_COLLECTIVES)}"
        )
    if len(set(multi)) != len(multi):
        raise ConfigError(f"{source}: nccl.multi_node_collectives: {multi!r} names a collective twice")
    cfg.nccl_multi_node_collectives = list(multi)
    launcher = nccl.get("launcher", [])
    if not (isinstance(launcher, list) and all(isinstance(a, str) for a in launcher)):
        raise ConfigError(
            f'{source}: nccl.launcher: must be a list of strings, e.g. ["srun", "-N", "{{nnodes}}"]'
        )
    cfg.nccl_launcher = launcher
    cfg.nccl_pairwise = v.boolean(nccl, "pairwise", "nccl.", default=False)
    cfg.gloo_port = v.integer(nccl, "port", "nccl.", minimum=1, default=cfg.gloo_port)
    limits = v.obj(data, "limits")
    v.known_keys(limits, {"memlock_kib": ""}, "limits.")
    if "memlock_kib" in limits:
        mem = limits["memlock_kib"]
        if not (mem == "unlimited" or (isinstance(mem, int) and not isinstance(mem, bool) and mem > 0)):
            raise ConfigError(
                f'{source}: limits.memlock_kib: got {mem!r}; use "unlimited" or a positive integer'
            )
        cfg.memlock_kib = str(mem)
    burn = v.obj(data, "gpu_burn")
    v.known_keys(burn, {"path": ""}, "gpu_burn.")
    cfg.gpu_burn_path = v.string(burn, "path", "gpu_burn.") or None
    skips = data.get("skip_checks", [])
    if not (isinstance(skips, list) and all(isinstance(s, str) for s in skips)):
        raise ConfigError(f"{source}: skip_checks: must be a list of check ids")
    cfg.skip_checks = list(skips)
    return cfg


def _infiniband(v: "_Validator", ib: Dict[str, Any], cfg: NodeConfig) -> None:
    v.known_keys(ib, {"ports": "", "count": "", "rate_gbps": "", "link_layer": ""}, "infiniband.")
    ports = ib.get("ports", [])
    if not (isinstance(ports, list) and all(isinstance(p, str) and _IB_PORT.match(p) for p in ports)):
        raise ConfigError(
            f'{v.source}: infiniband.ports: got {ports!r}; must be a list of HCA ports such as ["mlx5_0", "mlx5_1:1"]'
        )
    cfg.ib_ports = list(ports)
    cfg.ib_port_count = v.integer(ib, "count", "infiniband.", minimum=0, default=0)
    rate = ib.get("rate_gbps")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0):
        raise ConfigError(
            f"{v.source}: infiniband.rate_gbps: got {rate!r}; must be a number > 0 (Gb/s, e.g. 400)"
        )
    cfg.ib_rate_gbps = None if rate is None else float(rate)
    layer = ib.get("link_layer")
    if layer is not None and layer not in ("InfiniBand", "Ethernet"):
        raise ConfigError(
            f'{v.source}: infiniband.link_layer: got {layer!r}; use "InfiniBand" or "Ethernet" (RoCE)'
        )
    cfg.ib_link_layer = layer


def _pins(v: "_Validator", raw: Any) -> List[Pin]:
    if not isinstance(raw, list):
        raise ConfigError(f'{v.source}: pins: must be a list of {{"package", "version", "held"}} objects')
    pins = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict):
            raise ConfigError(f"{v.source}: pins[{i}]: must be an object with package, version and held")
        v.known_keys(p, {"package": "", "version": "", "held": ""}, f"pins[{i}].")
        pins.append(
            Pin(
                package=v.string(p, "package", f"pins[{i}].", True),
                version=v.string(p, "version", f"pins[{i}]."),
                held=v.boolean(p, "held", f"pins[{i}].", default=True),
            )
        )
    return pins


def _peers(v: "_Validator", raw: Any, node: str) -> List[Peer]:
    if not isinstance(raw, list):
        raise ConfigError(f'{v.source}: peers: must be a list of {{"name", "address"}} objects')
    peers = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict):
            raise ConfigError(f"{v.source}: peers[{i}]: must be an object with name and address")
        v.known_keys(p, {"name": "", "address": ""}, f"peers[{i}].")
        peer = Peer(v.string(p, "name", f"peers[{i}].", True), v.string(p, "address", f"peers[{i}].", True))
        if peer.name == node:
            raise ConfigError(
                f"{v.source}: peers[{i}].name: {node!r} is this node; list only the other nodes"
            )
        peers.append(peer)
    return peers


def _sweep(v: "_Validator", raw: Any, where: str) -> List[int]:
    """A list-valued size: message sizes in bytes, each an integer > 0 ([] = no sweep)."""
    example = "e.g. [1048576, 4194304, 16777216]"
    if not isinstance(raw, list):
        raise ConfigError(
            f"{v.source}: {where}: got {raw!r}; must be a list of message sizes in bytes, {example}"
        )
    for i, n in enumerate(raw):
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ConfigError(
                f"{v.source}: {where}[{i}]: got {n!r}; every entry must be an integer > 0 (bytes), {example}"
            )
    return list(raw)


def _numbers(
    v: "_Validator", data: Dict[str, Any], key: str, defaults: Dict[str, Any], allow_new: bool = False
) -> Dict[str, float]:
    given = v.obj(data, key)
    if not allow_new:
        v.known_keys(given, {k: "" for k in defaults}, f"{key}.")
    out: Dict[str, float] = dict(defaults)
    for name, val in given.items():
        if isinstance(val, bool) or not isinstance(val, (int, float)) or val < 0:
            raise ConfigError(f"{v.source}: {key}.{name}: got {val!r}; must be a number >= 0")
        out[name] = val
    return out


class _Validator:
    def __init__(self, source: str) -> None:
        self.source = source

    def known_keys(self, data: Dict[str, Any], known: Dict[str, str], prefix: str) -> None:
        for k in data:
            if k not in known:
                close = difflib.get_close_matches(k, list(known), n=1)
                hint = (
                    f"; did you mean {prefix}{close[0]!r}?"
                    if close
                    else f"; known: {', '.join(sorted(known))}"
                )
                raise ConfigError(f"{self.source}: {prefix}{k}: unknown key{hint}")

    def obj(self, data: Dict[str, Any], key: str) -> Dict[str, Any]:
        val = data.get(key)
        if val is None:
            return {}
        if not isinstance(val, dict):
            raise ConfigError(f"{self.source}: {key}: must be an object, got {type(val).__name__}")
        return val

    def string(self, data: Dict[str, Any], key: str, prefix: str = "", required: bool = False) -> str:
        val = data.get(key)
        if val is None:
            if required:
                raise ConfigError(f"{self.source}: {prefix}{key}: required (a string)")
            return ""
        if not isinstance(val, str) or (required and not val):
            raise ConfigError(f"{self.source}: {prefix}{key}: got {val!r}; must be a non-empty string")
        return val

    def integer(self, data: Dict[str, Any], key: str, prefix: str, minimum: int, default: int) -> int:
        val = data.get(key, default)
        if isinstance(val, bool) or not isinstance(val, int) or val < minimum:
            raise ConfigError(f"{self.source}: {prefix}{key}: got {val!r}; must be an integer >= {minimum}")
        return val

    def boolean(self, data: Dict[str, Any], key: str, prefix: str, default: bool) -> bool:
        val = data.get(key, default)
        if not isinstance(val, bool):
            raise ConfigError(f"{self.source}: {prefix}{key}: got {val!r}; must be true or false")
        return val

    def version(self, val: Any, where: str) -> str:
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            val = str(val)
        if not isinstance(val, str) or not val.strip():
            raise ConfigError(
                f'{self.source}: {where}: got {val!r}; must be a version string such as "2.26.2"'
            )
        return val.strip()
