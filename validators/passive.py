"""The passive check: what costs seconds and needs no workload, run by Slurm's HealthCheckProgram.

What changed since the last run, from a small state file on the node:
- Xid events (and GPUs that fell off the bus without one) in the kernel log since the last run,
  deduplicated: one reason per Xid kind with its count, never one per line. Node-fault Xids drain;
  application Xids (the job's own fault) and unknown ones are reported only. The split is
  ``validators.parsers.xid`` (NVIDIA's Xid catalogue, docs.nvidia.com/deploy/xid-errors/
  analyzing-xid-catalog.html, "Resolution Bucket": RESTART_APP for application errors, reset or
  contact support for node faults);
- uncorrected volatile ECC errors that grew since the last run;
- a pending or failed row remap, pending retired pages (states: they drain while they last);
- an active hardware or thermal throttle reason (the same rule as the gpu-throttle check);
- an RDMA port (InfiniBand or EFA, /sys/class/infiniband/<dev>/ports/<n>/state) that was ACTIVE at
  the last run and is not now, or is gone.

Every drain reason reads ``clusterforge: <check>: <evidence>``. ``verdict`` is pure (tests feed it
captured kernel logs and nvidia-smi outputs); ``run_passive`` does the I/O. Python 3.9 like the
rest of the validators (they run on the nodes' own Python).

Test hook (validators/faults.py): ``/etc/clusterforge/faults/xid`` adds its lines to the kernel
log as read, counted apart from it (each line once, whatever the real log does meanwhile); a line
that is only a number N becomes an Xid N line, so ``echo 79 > /etc/clusterforge/faults/xid`` is one
new Xid 79 on the next run. Its evidence says so.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Optional, Tuple

from validators.faults import active_fault
from validators.parsers.xid import classify_xid, parse_xid

STATE_VERSION = 1
PREFIX = "clusterforge:"
REASON_MAX = 200  # the drain reason's length; the full list is in the JSON output
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
HOOK_PCI = "0000:00:00"


def hook_lines(content: str) -> List[str]:
    """The test hook's lines as kernel log lines (a bare number is an Xid of that kind)."""
    out = []
    for number, raw in enumerate(content.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.isdigit():
            # Numbered so that each line of the hook file is its own event (the marker is the raw line).
            line = f"NVRM: Xid (PCI:{HOOK_PCI}): {line}, pid=0, name=clusterforge-fault-hook, test hook line {number}"
        out.append(line)
    return out


def _items(text: str) -> List[Dict[str, Any]]:
    """Xid events and bus drops in log order, each with its raw line (the since-last-run marker)."""
    lines = text.splitlines()
    parsed = parse_xid(text)
    items: List[Dict[str, Any]] = []
    for ev in parsed.get("events") or []:
        items.append(dict(ev, kind="xid", raw=lines[ev["line"] - 1]))
    for drop in parsed.get("bus_drops") or []:
        items.append(dict(drop, kind="bus-drop", raw=lines[drop["line"] - 1]))
    items.sort(key=lambda item: item["line"])
    return items


def since_marker(items: List[Dict[str, Any]], marker: Optional[str], seen: int = 0) -> List[Dict[str, Any]]:
    """Items after the ``seen``-th one whose raw line is ``marker`` (identical lines repeat: a bare
    ``NVRM:`` line, or an Xid storm within one second of journalctl's stamps); after the last such one
    when fewer are left (the log rotated); all of them when it is gone (new boot, first run)."""
    if not marker:
        return items
    last = -1
    count = 0
    for index, item in enumerate(items):
        if item["raw"] == marker:
            count += 1
            last = index
            if seen and count == seen:
                return items[index + 1 :]
    return items[last + 1 :] if last >= 0 else items


def _occurrences(items: List[Dict[str, Any]], raw: str) -> int:
    return sum(1 for item in items if item["raw"] == raw)


def _xid_reasons(new: List[Dict[str, Any]]) -> Tuple[List[str], List[str]]:
    """(drain reasons, notes): one per Xid kind with its count and GPUs, one per dropped GPU."""
    kinds: Dict[int, Dict[str, Any]] = {}
    drains: List[str] = []
    for item in new:
        if item["kind"] == "bus-drop":
            drains.append(f"{PREFIX} xid: GPU {item['pci']} fell off the bus (no Xid printed)")
            continue
        entry = kinds.setdefault(item["xid"], {"count": 0, "pcis": [], "message": item.get("message", "")})
        entry["count"] += 1
        if item["pci"] not in entry["pcis"]:
            entry["pcis"].append(item["pci"])
    notes: List[str] = []
    for xid in sorted(kinds):
        entry = kinds[xid]
        kind = classify_xid(xid)
        hook = " (test hook)" if HOOK_PCI in entry["pcis"] else ""
        text = (
            f"Xid {xid} x{entry['count']} on {', '.join(entry['pcis'])} ({kind} fault){hook}: "
            f"{' '.join(str(entry['message']).split())[:80]}"
        )
        if kind == "node":
            drains.append(f"{PREFIX} xid: {text}")
        else:
            notes.append(f"xid: {text}")
    return drains, notes


def _gpu_reasons(gpus: List[Dict[str, Any]], previous: Dict[str, int]) -> Tuple[List[str], Dict[str, int]]:
    """(drain reasons, the ECC counters to remember) from ``nvidia-smi -q`` as the parser reads it."""
    from validators.checks.gpu import bad_throttle, truthy

    drains: List[str] = []
    counters: Dict[str, int] = {}
    for i, gpu in enumerate(gpus):
        key = str(gpu.get("uuid") or gpu.get("bus_id") or i)
        label = f"GPU {i} ({gpu.get('uuid') or gpu.get('bus_id') or '?'})"
        ecc = gpu.get("ecc_uncorrected_volatile")
        if isinstance(ecc, int) and not isinstance(ecc, bool):
            counters[key] = ecc
            before = previous.get(key, 0)
            # Volatile counters restart at a driver reload: a lower count is a new baseline.
            grown = ecc - before if ecc >= before else ecc
            if grown > 0:
                drains.append(
                    f"{PREFIX} ecc: {label}: +{grown} uncorrected volatile ECC error(s) (now {ecc})"
                )
        if truthy(gpu.get("remapped_rows_failure")):
            drains.append(
                f"{PREFIX} row-remap: {label}: row remap failure (out of spare rows: replace the GPU)"
            )
        elif truthy(gpu.get("remapped_rows_pending")):
            drains.append(f"{PREFIX} row-remap: {label}: row remap pending (reset the GPU)")
        if truthy(gpu.get("retired_pages_pending")):
            drains.append(f"{PREFIX} retired-pages: {label}: retired pages pending (reset the GPU)")
        bad = bad_throttle(list(gpu.get("throttle_active") or []))
        if bad:
            drains.append(f"{PREFIX} throttle: {label}: {', '.join(bad)}")
    return drains, counters


def _port_state(text: str) -> str:
    """``"4: ACTIVE"`` (the sysfs file, as ibstatus prints it too) -> ``"ACTIVE"``."""
    return text.strip().split(":", 1)[-1].strip().upper()


def _link_reasons(links: Dict[str, str], previous: Dict[str, str]) -> List[str]:
    """A port ACTIVE at the last run that is not now (or is gone). Ports never up are the full check's."""
    drains = []
    for port, before in sorted(previous.items()):
        now = links.get(port)
        if before == "ACTIVE" and now != "ACTIVE":
            device, _, number = port.partition("/")
            drains.append(f"{PREFIX} link: {device} port {number} went down (ACTIVE -> {now or 'gone'})")
    return drains


def verdict(
    kernel_log: str,
    gpus: Optional[List[Dict[str, Any]]],
    state: Dict[str, Any],
    boot_id: str,
    links: Optional[Dict[str, str]] = None,
    hook: str = "",
) -> Dict[str, Any]:
    """Pure: this run's drain reasons and notes, and the state the next run starts from.

    ``gpus`` None: nvidia-smi is not there (a node without GPUs); only the kernel log is read.
    """
    same_boot = state.get("version") == STATE_VERSION and state.get("boot_id") == boot_id
    items = _items(kernel_log)
    new = since_marker(items, state.get("marker") if same_boot else None, int(state.get("marker_seen") or 0))
    # The test hook's lines are counted apart from the real log (its own count), so real lines logged
    # after the hook file was written are still new. A new list: ``new`` may be ``items`` itself.
    hooked = _items(hook) if hook else []
    new = new + hooked[int(state.get("hook_seen") or 0) if same_boot else 0 :]
    drains, notes = _xid_reasons(new)
    previous_ecc: Dict[str, int] = dict(state.get("ecc") or {}) if same_boot else {}
    # nvidia-smi not read this run: keep the last counters, or the next run would take every
    # standing count for new errors.
    counters = previous_ecc
    if gpus is not None:
        more, counters = _gpu_reasons(gpus, previous_ecc)
        drains += more
    ports = {port: _port_state(text) for port, text in (links or {}).items()}
    drains += _link_reasons(ports, dict(state.get("links") or {}) if same_boot else {})
    reason = ""
    if drains:
        reason = drains[0] if len(drains) == 1 else f"{drains[0]} (+{len(drains) - 1} more)"
        if len(reason) > REASON_MAX:
            reason = reason[: REASON_MAX - 3] + "..."
    next_state = {
        "version": STATE_VERSION,
        "boot_id": boot_id,
        "marker": items[-1]["raw"] if items else (state.get("marker") if same_boot else None),
        "marker_seen": _occurrences(items, items[-1]["raw"]) if items else int(state.get("marker_seen") or 0),
        "hook_seen": len(hooked),
        "ecc": counters,
        "links": ports,
    }
    xids: Dict[str, int] = {}
    for item in new:
        key = str(item["xid"]) if item["kind"] == "xid" else "bus-drop"
        xids[key] = xids.get(key, 0) + 1
    return {
        "drain": reason,
        "reasons": drains,
        "notes": notes,
        "new_events": len(new),
        "new_xids": xids,
        "state": next_state,
    }


TEXTFILE_NAME = "clusterforge_passive.prom"


def _label(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def render_textfile(result: Dict[str, Any], now: float) -> str:
    """node_exporter textfile metrics of one run (the alert rules in roles/monitoring/files read them)."""
    lines = [
        "# HELP clusterforge_passive_last_run_timestamp_seconds When the passive health check last ran.",
        "# TYPE clusterforge_passive_last_run_timestamp_seconds gauge",
        f"clusterforge_passive_last_run_timestamp_seconds {now:.0f}",
        "# HELP clusterforge_passive_drain 1 if the last run asked Slurm to drain the node, else 0.",
        "# TYPE clusterforge_passive_drain gauge",
        f"clusterforge_passive_drain {1 if result.get('drain') else 0}",
        "# HELP clusterforge_passive_run_seconds How long the last run took.",
        "# TYPE clusterforge_passive_run_seconds gauge",
        f"clusterforge_passive_run_seconds {float(result.get('seconds') or 0):.3f}",
        "# HELP clusterforge_passive_new_xid_events Xid events (and GPUs off the bus) first seen by the last run.",
        "# TYPE clusterforge_passive_new_xid_events gauge",
    ]
    for xid, count in sorted((result.get("new_xids") or {}).items()):
        kind = "node" if xid == "bus-drop" else classify_xid(int(xid))
        lines.append(f"clusterforge_passive_new_xid_events{{xid={_label(xid)},kind={_label(kind)}}} {count}")
    checks: Dict[str, int] = {}
    for reason in result.get("reasons") or []:
        check = reason[len(PREFIX) :].strip().split(":", 1)[0]
        checks[check] = checks.get(check, 0) + 1
    lines += [
        "# HELP clusterforge_passive_reasons Drain reasons of the last run, by check.",
        "# TYPE clusterforge_passive_reasons gauge",
    ]
    lines += [f"clusterforge_passive_reasons{{check={_label(c)}}} {n}" for c, n in sorted(checks.items())]
    return "\n".join(lines) + "\n"


def write_textfile(folder: str, result: Dict[str, Any], now: float) -> bool:
    """Write the metrics atomically (node_exporter never reads half a file); False where the folder is absent."""
    if not os.path.isdir(folder):
        return False
    path = os.path.join(folder, TEXTFILE_NAME)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(render_textfile(result, now))
    os.replace(tmp, path)
    return True


# --- I/O ----------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return ""


def load_state(path: str) -> Dict[str, Any]:
    try:
        data = json.loads(_read(path) or "{}")
    except ValueError:
        return {}  # a torn or hand-edited file: start again (everything since boot is new)
    return data if isinstance(data, dict) else {}


def save_state(path: str, state: Dict[str, Any]) -> None:
    """Write atomically: a HealthCheckProgram killed mid-write leaves the old state."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(state, fh)
    os.replace(tmp, path)


IB_SYSFS = "/sys/class/infiniband"


def read_links(root: str = IB_SYSFS) -> Dict[str, str]:
    """``{"mlx5_0/1": "4: ACTIVE"}`` for every RDMA port (InfiniBand HCAs and EFA devices alike);
    the file's text is what ibstatus prints as ``state:`` (tests/data/ibstatus)."""
    links: Dict[str, str] = {}
    try:
        devices = sorted(os.listdir(root))
    except OSError:
        return links
    for device in devices:
        ports = os.path.join(root, device, "ports")
        try:
            numbers = sorted(os.listdir(ports))
        except OSError:
            continue
        for number in numbers:
            text = _read(os.path.join(ports, number, "state")).strip()
            if text:
                links[f"{device}/{number}"] = text
    return links


def run_passive(
    state_path: str, runner: Any, boot_id_file: str = BOOT_ID_FILE, ib_root: str = IB_SYSFS
) -> Dict[str, Any]:
    """Read the kernel log and nvidia-smi, judge, remember. ``runner(argv, timeout)`` -> (rc, out, err)."""
    from validators.checks.base import NVIDIA_SMI_XML
    from validators.checks.system import KERNEL_LOG_COMMANDS
    from validators.parsers import PARSERS

    started = time.monotonic()
    notes: List[str] = []
    text = ""
    for argv in KERNEL_LOG_COMMANDS:
        rc, stdout, _stderr = runner(list(argv), 15.0)
        if rc == 0 and stdout.strip() and stdout.strip() != "-- No entries --":
            text = stdout
            break
    else:
        notes.append("kernel log: neither journalctl -k nor dmesg could be read")
    hook = active_fault("xid")
    hooked = "\n".join(hook_lines(hook)) + "\n" if hook else ""
    gpus: Optional[List[Dict[str, Any]]] = None
    rc, stdout, stderr = runner(list(NVIDIA_SMI_XML), 15.0)
    if rc == 0:
        gpus = list(PARSERS["nvidia-smi"](stdout).get("gpus") or [])
    elif rc != 127:
        notes.append(
            f"nvidia-smi exited {rc}: {(stdout + stderr).strip()[:120]} (the full health check judges it)"
        )
    boot = _read(boot_id_file).strip() or "unknown"
    result = verdict(text, gpus, load_state(state_path), boot, read_links(ib_root), hooked)
    save_state(state_path, result.pop("state"))
    result["notes"] = notes + result["notes"]
    result["seconds"] = round(time.monotonic() - started, 3)
    return result
