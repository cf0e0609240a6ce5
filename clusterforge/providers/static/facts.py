"""What a static host is, read over SSH in one call, and how it differs from what the spec declares.

``PROBE`` is a POSIX sh script of read-only commands printing ``key=value`` lines; ``parse_facts``
is pure, and ``mismatches`` compares the facts with the declared catalogue entry, so both are
tested without a machine. Sources of each fact:

- OS: ``/etc/os-release`` ``ID`` and ``VERSION_ID`` (os-release(5)), e.g. ``ubuntu`` ``22.04``.
- become: ``sudo -n true`` (non-interactive: fails instead of asking for a password, sudo(8)).
- memory: ``MemTotal`` of ``/proc/meminfo`` in kB (proc(5)); the kernel reports less than the
  installed size, so a host passes at the same 95 % the rendered slurm.conf RealMemory uses.
- GPUs: NVIDIA PCI functions (vendor 0x10de, class 0x0300xx VGA or 0x0302xx 3D controller) in
  ``/sys/bus/pci/devices``, which needs no driver; NVSwitches are class 0x0680 and not counted.
  The model comes from ``nvidia-smi --query-gpu=name --format=csv,noheader`` once a driver is in.
- InfiniBand: ``/sys/class/infiniband/<device>/ports/<port>/rate`` (Linux ABI stable
  sysfs-class-infiniband), e.g. ``400 Gb/sec (4X NDR)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clusterforge.catalog.hardware import InstanceType
from clusterforge.inventory import REAL_MEMORY_RATIO

PROBE_VERSION = "clusterforge-static-1"

PROBE = f"""echo probe={PROBE_VERSION}
if [ -r /etc/os-release ]; then . /etc/os-release; echo "os_id=$ID"; echo "os_version=$VERSION_ID"; fi
echo "user=$(id -un)"
if [ "$(id -u)" = 0 ]; then echo become=root
elif sudo -n true 2>/dev/null; then echo become=ok
else echo "become=fail $(sudo -n true 2>&1 | head -n 1)"; fi
echo "cpus=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
awk '/^MemTotal:/ {{print "mem_kib=" $2}}' /proc/meminfo
for d in /sys/bus/pci/devices/*; do
  [ -r "$d/vendor" ] || continue
  case "$(cat "$d/vendor"):$(cat "$d/class")" in 0x10de:0x0300*|0x10de:0x0302*) echo "gpu_pci=${{d##*/}}";; esac
done
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/gpu_name=/'
fi
for p in /sys/class/infiniband/*/ports/*; do
  [ -r "$p/rate" ] || continue
  dev=${{p%/ports/*}}; echo "ib_port=${{dev##*/}}:${{p##*/}} $(cat "$p/rate")"
done
"""


@dataclass(frozen=True)
class IbPort:
    name: str  # mlx5_0:1
    rate_gbps: float | None


@dataclass(frozen=True)
class HostFacts:
    probe: str = ""
    os_id: str = ""
    os_version: str = ""
    user: str = ""
    become: str = ""  # "root" | "ok" | "fail <sudo's first line>"
    cpus: int = 0
    mem_kib: int = 0
    gpu_pci: tuple[str, ...] = ()
    gpu_names: tuple[str, ...] = ()
    ib_ports: tuple[IbPort, ...] = field(default_factory=tuple)

    @property
    def os(self) -> str:
        """Like the spec's software.os_image: ``ubuntu-22.04``, ``debian-12``."""
        return f"{self.os_id}-{self.os_version}" if self.os_id else "unknown"

    @property
    def become_ok(self) -> bool:
        return self.become in ("root", "ok")


_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


def parse_facts(text: str) -> HostFacts:
    """The probe's ``key=value`` lines; unknown keys and noise (a login banner) are ignored."""
    one: dict[str, str] = {}
    gpus: list[str] = []
    names: list[str] = []
    ports: list[IbPort] = []
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        value = value.strip()
        if key == "gpu_pci":
            gpus.append(value)
        elif key == "gpu_name":
            names.append(value)
        elif key == "ib_port":
            port, _, rate = value.partition(" ")
            match = _RATE.match(rate)
            ports.append(IbPort(port, float(match.group(1)) if match else None))
        elif key in ("probe", "os_id", "os_version", "user", "become", "cpus", "mem_kib"):
            one[key] = value
    return HostFacts(
        probe=one.get("probe", ""),
        os_id=one.get("os_id", "").strip('"'),
        os_version=one.get("os_version", "").strip('"'),
        user=one.get("user", ""),
        become=one.get("become", ""),
        cpus=int(one["cpus"]) if one.get("cpus", "").isdigit() else 0,
        mem_kib=int(one["mem_kib"]) if one.get("mem_kib", "").isdigit() else 0,
        gpu_pci=tuple(gpus),
        gpu_names=tuple(names),
        ib_ports=tuple(ports),
    )


def _model_matches(declared: str, found: str) -> bool:
    """nvidia-smi names the board ("NVIDIA H100 80GB HBM3"); the catalogue the model ("H100")."""
    return re.search(rf"(^|\W){re.escape(declared)}(\W|$)", found, re.IGNORECASE) is not None


def mismatches(facts: HostFacts, declared: InstanceType) -> list[str]:
    """Each way the host differs from its declared type: 'expected X, found Y' fragments."""
    out: list[str] = []
    if facts.cpus and facts.cpus < declared.vcpus:
        out.append(f"CPUs: expected {declared.vcpus}, found {facts.cpus}")
    found_mib = facts.mem_kib // 1024
    floor = int(declared.memory_mib * REAL_MEMORY_RATIO)
    if found_mib < floor:
        out.append(
            f"memory: expected {declared.memory_mib} MiB (at least {floor} visible), found {found_mib} MiB"
        )
    want = declared.gpu_count
    if len(facts.gpu_pci) != want:
        model = f" {declared.gpu.model}" if declared.gpu else ""
        out.append(f"GPUs: expected {want}{model}, found {len(facts.gpu_pci)} NVIDIA PCI GPU(s)")
    if declared.gpu and facts.gpu_names:
        other = sorted({n for n in facts.gpu_names if not _model_matches(declared.gpu.model, n)})
        if other:
            out.append(f"GPU model: expected {declared.gpu.model}, found {', '.join(other)}")
    ib_want = declared.network.infiniband_ports
    if ib_want:
        rate = declared.network.infiniband_rate_gbps
        fast = [p for p in facts.ib_ports if rate is None or (p.rate_gbps or 0) >= rate]
        if len(fast) < ib_want:
            at = f" at {rate:g} Gb/s" if rate else ""
            seen = ", ".join(f"{p.name} {p.rate_gbps or 0:g}" for p in facts.ib_ports) or "none"
            out.append(f"InfiniBand ports: expected {ib_want}{at}, found {len(fast)} (ports: {seen})")
    return out
