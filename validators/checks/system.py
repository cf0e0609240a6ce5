"""Checks that apply to every node, GPU or not: shared storage, memlock, kernel-log Xids."""

from __future__ import annotations

import contextlib
import hashlib
import os
import resource
import time
from typing import List, Optional, Tuple

from validators.checks.base import Check, Context
from validators.result import CheckResult, Outcome
from validators.runner import describe_failure

ALL = ("quick", "standard", "full")


def mount_of(path: str) -> Tuple[str, str]:
    """(mount point, filesystem type) holding ``path``, from /proc/self/mountinfo."""
    real = os.path.realpath(path)
    point = real
    while not os.path.ismount(point):
        point = os.path.dirname(point)
    fstype = "?"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 4 and fields[4] == point and " - " in line:
                    fstype = line.split(" - ", 1)[1].split()[0]
    except OSError:
        pass
    return point, fstype


def write_read(path: str, size: int, block: int = 1 << 20) -> Tuple[float, float, str, str]:
    """Write ``size`` random-ish bytes with fsync, read them back; (write s, read s, sha in, sha out)."""
    seed = hashlib.sha256(str(time.time()).encode()).digest()
    chunk = (seed * (block // len(seed) + 1))[:block]
    sha_in = hashlib.sha256()
    start = time.perf_counter()
    with open(path, "wb") as fh:
        left = size
        while left > 0:
            piece = chunk[: min(block, left)]
            fh.write(piece)
            sha_in.update(piece)
            left -= len(piece)
        fh.flush()
        os.fsync(fh.fileno())
    write_s = time.perf_counter() - start
    sha_out = hashlib.sha256()
    start = time.perf_counter()
    with open(path, "rb") as fh:
        for piece in iter(lambda: fh.read(block), b""):
            sha_out.update(piece)
    read_s = time.perf_counter() - start
    return write_s, read_s, sha_in.hexdigest(), sha_out.hexdigest()


class SharedStorage(Check):
    id = "shared-storage"
    group = "preflight"
    profiles = ALL
    needs = ()
    measures = (
        "the shared storage path is a mounted filesystem (not the root disk), writable; a file of "
        "sizes.storage_test_bytes written with fsync reads back identical; write/read MB/s"
    )

    def applies(self, config) -> Optional[str]:
        return None if config.shared_storage_path else "not applicable: NODE.json sets no shared_storage.path"

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        path = ctx.config.shared_storage_path or ""
        if not os.path.isdir(path):
            out.fail(f"{path}: does not exist or is not a directory (is the shared filesystem mounted?)")
            return out.finish("")
        point, fstype = mount_of(path)
        out.evidence(f"{path} is on mount {point} ({fstype})")
        if ctx.config.shared_storage_require_mount and point == "/":
            out.fail(
                f"{path}: not on a mounted filesystem (it is on the root disk); mount the shared storage there"
            )
            return out.finish("")
        size = ctx.config.size("storage_test_bytes")
        target = os.path.join(path, f".validators-{ctx.config.node}-{os.getpid()}.tmp")
        out.command(f"write {size} bytes + fsync, read back: {target}")
        try:
            write_s, read_s, sha_in, sha_out = write_read(target, size)
        except OSError as exc:
            out.fail(f"{path}: cannot write and read back a test file: {exc.strerror} ({target})")
            return out.finish("")
        finally:
            with contextlib.suppress(OSError):
                os.unlink(target)
        mb = size / 1e6
        out.metric("write_rate", round(mb / max(write_s, 1e-9), 1), "MB/s")
        out.metric("read_rate", round(mb / max(read_s, 1e-9), 1), "MB/s")
        out.metric("test_bytes", size, "B")
        if sha_in != sha_out:
            out.fail(
                f"{path}: data read back differs from data written (sha256 {sha_out[:12]} != {sha_in[:12]})"
            )
        return out.finish(f"{path} on {point} ({fstype}) writable, {size} B read back identical")


class MemlockLimit(Check):
    id = "memlock-limit"
    group = "preflight"
    profiles = ALL
    needs = ()
    measures = "the locked-memory limit (ulimit -l) of the suite's process is at least NODE.json limits.memlock_kib (EFA needs unlimited)"

    def applies(self, config) -> Optional[str]:
        if config.memlock_kib or config.efa_interfaces:
            return None
        return "not applicable: no EFA interfaces and no limits.memlock_kib in NODE.json"

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        want = ctx.config.memlock_kib or "unlimited"
        soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        out.command("getrlimit(RLIMIT_MEMLOCK)")

        def show(v: int) -> str:
            return "unlimited" if v == resource.RLIM_INFINITY else str(v // 1024)

        out.evidence(f"soft {show(soft)} KiB, hard {show(hard)} KiB")
        out.metric("memlock_soft", None if soft == resource.RLIM_INFINITY else soft // 1024, "KiB")
        out.limit("limits.memlock_kib", None if want == "unlimited" else int(want), "KiB")
        if want == "unlimited":
            if soft != resource.RLIM_INFINITY:
                out.fail(
                    f"memlock limit is {show(soft)} KiB, EFA needs unlimited (set memlock unlimited in limits.conf / Slurm)"
                )
        elif soft != resource.RLIM_INFINITY and soft // 1024 < int(want):
            out.fail(f"memlock limit is {show(soft)} KiB, below the required {want} KiB")
        return out.finish(f"memlock limit {show(soft)} KiB")


def xid_kind(classification: object) -> str:
    """'node', 'application' or 'unknown' from whatever classify_xid returns."""
    text = (
        str(classification.get("kind") or classification)
        if isinstance(classification, dict)
        else str(classification)
    )
    text = text.lower()
    if "node" in text or "hardware" in text or "hw" in text:
        return "node"
    if "app" in text or "user" in text:
        return "application"
    return "unknown"


KERNEL_LOG_COMMANDS = (["journalctl", "-k", "-b", "-q", "--no-pager"], ["dmesg"])


def read_kernel_log(ctx: Context, out: Outcome) -> Tuple[Optional[str], List[str]]:
    """The kernel log since boot (journalctl, else dmesg), or None with each source's reason."""
    reasons: List[str] = []
    for argv in KERNEL_LOG_COMMANDS:
        out.command(argv)
        rc, stdout, stderr = ctx.run(argv)
        # journalctl exits 0 with "-- No entries --" (or nothing) where there is no journal:
        # that is not a kernel log read, so try the next source rather than pass on nothing.
        lines = [line for line in stdout.splitlines() if line.strip() and line.strip() != "-- No entries --"]
        if rc == 0 and lines:
            return stdout, reasons
        reasons.append(describe_failure(argv, rc, stdout, stderr) if rc else f"{argv[0]}: empty kernel log")
    return None, reasons


def xid_events(text: str) -> List[str]:
    """Xid events and bus drops of a kernel log, one comparable string each."""
    from validators.parsers import PARSERS

    parsed = PARSERS["xid"](text)
    found = [
        f"Xid {e.get('xid')} on {e.get('pci')}: {e.get('message', '')}" for e in parsed.get("events") or []
    ]
    return found + [f"GPU {d.get('pci')} fell off the bus" for d in parsed.get("bus_drops") or []]


class XidScan(Check):
    id = "xid-scan"
    group = "preflight"
    profiles = ALL
    needs = ("gpu",)
    measures = (
        "NVIDIA Xid events in the kernel log since boot, classified: node faults (48, 63, 64, 74, 79, 94, 95, ...) "
        "fail; application faults (13, 31, 43, 45, 68) are reported"
    )

    def run(self, ctx: Context) -> CheckResult:
        from validators.parsers import PARSERS
        from validators.parsers.xid import classify_xid

        out = Outcome(self.id)
        text, reasons = read_kernel_log(ctx, out)
        if text is None:
            out.fail("cannot read the kernel log: " + "; ".join(reasons))
            return out.finish("")
        parsed = PARSERS["xid"](text)
        events = parsed.get("events") or []
        for drop in parsed.get("bus_drops") or []:
            out.fail(
                f"GPU {drop.get('pci')} fell off the bus (kernel log line {drop.get('line')}, no Xid printed)"
            )
        counts = {"node": 0, "application": 0, "unknown": 0}
        for ev in events:
            kind = xid_kind(ev.get("class") or classify_xid(ev.get("xid")))
            counts[kind] += 1
            line = f"Xid {ev.get('xid')} on {ev.get('pci')} ({kind} fault): {ev.get('message', '')}"
            out.evidence(line)
            if kind == "node":
                out.fail(line)
            elif kind == "unknown":
                out.warn(line)
        for kind, n in counts.items():
            out.metric(f"xid_{kind}", n, "count")
        extra = f", {counts['application']} application fault(s) reported" if counts["application"] else ""
        return out.finish(f"no node-fault Xid since boot{extra}")
