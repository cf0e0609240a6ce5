"""Burn-in: sustained matmul on every device (rate and bit-exactness), DCGM diagnostics, gpu-burn."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from typing import Any, Dict, Iterator, List, Optional

from validators.checks.base import NVIDIA_SMI_XML, Check, Context
from validators.checks.checkpoint import last_json, tail
from validators.checks.gpu import bad_throttle, gpu_label
from validators.checks.system import read_kernel_log, xid_events
from validators.faults import active_fault, fault_path
from validators.profiles import DCGM_LEVEL
from validators.result import CheckResult, Outcome
from validators.runner import RC_TIMEOUT, describe_failure, end_group


def judge_matmul(
    out: Outcome,
    devices: List[Dict[str, Any]],
    floor: Optional[float],
    floor_key: str,
    gap_key: str,
    gap_pct: float,
    unit: str,
    scale: float,
    warn_pct: Optional[float] = None,
) -> None:
    """Rates vs floor and vs the node median; bit-exactness across repetitions and devices.

    The judged rate is the matmuls' own (``gflops``: timed without the comparison); the loop's rate
    with the comparison and its host sync (``gflops_with_check``) is reported beside it. A device
    more than ``gap_pct`` under the node median fails, more than ``warn_pct`` warns (Azure's GEMM
    bands, 7 % and 3.5 %, hardware.yaml common_thresholds)."""
    import statistics  # here: it costs every `validators list` a few ms

    rates = [d["gflops"] / scale for d in devices if "gflops" in d]
    median = statistics.median(rates) if rates else 0.0
    out.metric("rate_median", round(median, 3), unit)
    checked = [d["gflops_with_check"] / scale for d in devices if "gflops_with_check" in d]
    if checked:
        out.metric("rate_with_check_median", round(statistics.median(checked), 3), unit)
    out.limit(gap_key, gap_pct, "%")
    if warn_pct is not None:
        out.limit(gap_key.replace("gap_pct", "warn_pct"), warn_pct, "%")
    if floor is not None:
        out.limit(floor_key, floor, unit)
    else:
        out.warn(f"no threshold {floor_key} in NODE.json; rates measured, not judged against a floor")
    digests: Dict[str, List[Any]] = {}
    caused = any("error" in d and not d.get("after_peer") for d in devices)
    for d in devices:
        i = d.get("index")
        if "error" in d and d.get("after_peer") and caused:
            out.evidence(f"device {i}: {d['error']}")  # a consequence of the failed device, not a finding
            continue
        if "error" in d:
            stage = {"setup": "before the start", "barrier": "at the start", "run": "during the run"}.get(
                d.get("stage", ""), ""
            )
            out.fail(f"device {i}: {d['error']}" + (f" ({stage})" if stage else ""))
            continue
        rate = d["gflops"] / scale
        out.metric(f"rate_device_{i}", round(rate, 3), unit)
        with_check = d.get("gflops_with_check")
        out.evidence(
            f"device {i}: {rate:.3f} {unit} (matmul alone"
            + (f"; {with_check / scale:.3f} with the comparison" if with_check else "")
            + f"), {d['reps']} reps in {d['seconds']:.1f} s, {d['mismatches']} mismatching, digest {d['digest'][:16]}"
            + (" (stopped early: another device failed)" if d.get("stopped_early") else "")
        )
        if floor is not None and rate < floor:
            out.fail(f"device {i}: {rate:.3f} {unit} below the floor {floor:g} {unit} ({floor_key})")
        gap = (median - rate) / median * 100 if median else 0.0
        if gap > gap_pct:
            out.fail(
                f"device {i}: {rate:.3f} {unit} is {gap:.1f}% below the node median {median:.3f} (limit {gap_pct:g}%)"
            )
        elif warn_pct is not None and gap > warn_pct:
            out.warn(
                f"device {i}: {rate:.3f} {unit} is {gap:.1f}% below the node median {median:.3f} (warn at {warn_pct:g}%)"
            )
        if d["mismatches"]:
            first = d.get("first_mismatch") or {}
            detail = (
                f"; {first['elements']} element(s) off by up to {first['max_abs_diff']:.3g}"
                if first.get("elements")
                else ""
            )
            out.fail(
                f"device {i}: result changed across repetitions "
                f"({d['mismatches']} of {d['reps']} not bit-identical{detail})"
            )
        digests.setdefault(d["digest"], []).append(i)
    if len(digests) > 1:
        majority = max(digests.values(), key=len)
        odd = sorted(i for group in digests.values() if group is not majority for i in group)
        out.fail(
            f"devices {odd} computed a different result from devices {majority} (same inputs, not bit-identical)"
        )


class Telemetry:
    """Samples ``nvidia-smi -q -x`` every interval while a GPU workload runs."""

    def __init__(self, ctx: Context, interval: float) -> None:
        self.ctx, self.interval = ctx, interval
        self.samples: List[dict] = []
        self.failures: List[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "Telemetry":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(self.interval + self.ctx.timeout)

    def _loop(self) -> None:
        from validators.parsers import PARSERS

        while True:  # one sample at once, then one per interval
            rc, stdout, stderr = self.ctx.run(NVIDIA_SMI_XML)
            if rc != 0:
                self.failures.append("telemetry: " + describe_failure(NVIDIA_SMI_XML, rc, stdout, stderr))
            else:
                self.samples.append(PARSERS["nvidia-smi"](stdout))
            if self._stop.wait(self.interval):
                return

    def judge(self, out: Outcome) -> None:
        for f in self.failures[:3]:
            out.fail(f)
        out.metric("telemetry_samples", len(self.samples), "count")
        seen = set()
        for sample in self.samples:
            for i, gpu in enumerate(sample.get("gpus") or []):
                for reason in bad_throttle(list(gpu.get("throttle_active") or [])):
                    seen.add(f"{gpu_label(i, gpu)}: throttled by {reason} during the burn-in")
                ecc = gpu.get("ecc_uncorrected_volatile")
                if isinstance(ecc, int) and ecc > 0:
                    seen.add(f"{gpu_label(i, gpu)}: {ecc} uncorrected ECC error(s) during the burn-in")
        for msg in sorted(seen):
            out.fail(msg)


class MatmulBurnin(Check):
    id = "matmul-burnin"
    group = "burnin"
    profiles = ("quick", "standard", "full")
    needs = ("torch",)
    measures = (
        "sustained matmul for durations.burnin_seconds on every device (bf16 per GPU; fp32 single-thread "
        "workers on the CPU path): the matmuls' own rate (timed without the comparison; the rate with it "
        "reported beside) vs the catalogue floor and vs the node median, bit-exact results across repetitions "
        "and devices; every device ready within durations.matmul_setup_seconds, a failing or dying device named "
        "and the rest stopped; GPU telemetry (throttle, ECC) sampled and new Xids caught during the run"
    )

    def run(self, ctx: Context) -> CheckResult:
        cfg = ctx.config
        out = Outcome(self.id)
        seconds = cfg.duration("burnin_seconds")
        if cfg.has_gpu:
            devices, device_type, dim = cfg.gpu_count, "cuda", cfg.size("matmul_dim")
            floor_key, unit, scale = "matmul.tflops_min", "TFLOP/s", 1000.0
            if ctx.nvidia_smi(out) is None:  # nvidia-smi's own reason, before a slow torch start
                return out.finish("")
        else:
            devices, device_type, dim = cfg.size("cpu_workers"), "cpu", cfg.size("cpu_matmul_dim")
            floor_key, unit, scale = "matmul.cpu_gflops_min", "GFLOP/s", 1.0
        setup = cfg.duration("matmul_setup_seconds")
        base = [ctx.python, ctx.workload("matmul.py"), "--device-type", device_type, "--dim", str(dim)]
        argv = [
            *base,
            "--devices",
            str(devices),
            "--seconds",
            f"{seconds:g}",
            "--setup-seconds",
            f"{setup:g}",
        ]
        for hook, flag in (("nondeterministic", "--perturb-device"), ("vanished-device", "--vanish-device")):
            index = self._fault_hook(out, hook, devices)
            if index is not None:
                argv += [flag, str(index)]
        out.command(argv)
        # The workload bounds its own waits (setup, run, collection after a failure); this is the last resort.
        timeout = seconds + max(2 * setup + 60, cfg.duration("workload_timeout_seconds"))
        with self._competitor(ctx, out, base, devices):
            if cfg.has_gpu:
                rc, stdout, stderr = self._run_watched(ctx, out, argv, timeout)
            else:
                rc, stdout, stderr = ctx.run(argv, timeout)
        result = last_json(stdout)
        found = (result or {}).get("devices") or []
        if result is None or "error" in result or not found:
            reason = (result or {}).get("error") or tail(stderr or stdout)
            out.fail(f"matmul workload failed (rc {rc}): {reason}")
            return out.finish("")
        if len(found) != devices:
            out.fail(f"matmul workload reported {len(found)} device(s), expected {devices}")
        gap_key = "matmul.median_gap_pct" if cfg.has_gpu else "matmul.cpu_median_gap_pct"
        gap = float(cfg.thresholds[gap_key])  # always set: profiles.DEFAULT_THRESHOLDS
        warn = cfg.thresholds.get("matmul.median_warn_pct") if cfg.has_gpu else None
        judge_matmul(
            out, found, cfg.threshold(floor_key), floor_key, gap_key, gap, unit, scale,
            float(warn) if warn is not None else None,
        )  # fmt: skip
        if rc != 0 and not out.failures:
            out.fail(f"matmul workload exited rc {rc}: {tail(stderr or stdout)}")
        return out.finish(
            f"{devices} {device_type} device(s), {seconds:g} s: rates within {gap:g}% of the median, bit-identical"
        )

    def _run_watched(
        self, ctx: Context, out: Outcome, argv: List[str], timeout: float
    ) -> "tuple[int, str, str]":
        """The GPU run, with telemetry sampled during it and the kernel log read before and after."""
        cfg = ctx.config
        log_before, _ = read_kernel_log(ctx, out)
        with Telemetry(ctx, cfg.duration("telemetry_interval_seconds")) as telemetry:
            rc, stdout, stderr = ctx.run(argv, timeout)
        telemetry.judge(out)
        log_after, reasons = read_kernel_log(ctx, out)
        if log_before is None or log_after is None:
            out.warn("new Xids not checked: cannot read the kernel log (" + "; ".join(reasons) + ")")
        else:
            before = xid_events(log_before)
            new = xid_events(log_after)[len(before) :]  # the log since boot only grows
            out.metric("new_xid_events", len(new), "count")
            for event in new[:5]:
                out.fail(f"during the burn-in: {event}")
        return rc, stdout, stderr

    def _fault_hook(self, out: Outcome, hook: str, devices: int) -> Optional[int]:
        """A device-index test hook (validators/faults.py): which device it applies to, or None."""
        content = active_fault(hook)
        if content is None:
            return None
        index = int(content) if content.isdigit() else 0
        if index >= devices:
            index = 0
        what = {
            "nondeterministic": f"device {index}'s second repetition is changed by one ulp",
            "vanished-device": f"device {index} asks for a device that is not there before the start",
            "competing-process": f"a second process runs matmuls on device {index} during the burn-in",
        }[hook]
        out.evidence(
            f"FAULT INJECTION ACTIVE ({fault_path(hook)}): {what} (a test hook; remove the file on a real node)"
        )
        out.metric("fault_injection", 1, "count")
        return index

    @contextlib.contextmanager
    def _competitor(self, ctx: Context, out: Outcome, base: List[str], devices: int) -> Iterator[None]:
        """The ``competing-process`` test hook: another process computes on one device while the
        burn-in runs (started in its own session, its group killed afterwards)."""
        index = self._fault_hook(out, "competing-process", devices)
        if index is None:
            yield
            return
        argv = [*base, "--devices", "1", "--seconds", "0", "--compete-device", str(index)]
        out.command(argv)
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        try:
            yield
        finally:
            end_group(proc.pid, grace=2.0, proc=proc)
            proc.wait()


class DcgmDiag(Check):
    id = "dcgm-diag"
    group = "burnin"
    profiles = ("standard", "full")
    needs = ("gpu", "dcgm")
    measures = "dcgmi diag -r 3 (standard) / -r 4 (full) -j: every test passes (read from its JSON)"

    def applies(self, config) -> Optional[str]:
        reason = super().applies(config)
        if reason:
            return reason
        return None if "dcgm" in config.software else "not applicable: NODE.json pins no DCGM (software.dcgm)"

    def run(self, ctx: Context) -> CheckResult:
        from validators.parsers import PARSERS

        out = Outcome(self.id)
        level = DCGM_LEVEL[ctx.profile] or 3
        argv = ["dcgmi", "diag", "-r", str(level), "-j"]
        out.command(argv)
        rc, stdout, stderr = ctx.run(argv, ctx.config.duration("workload_timeout_seconds"))
        if rc == RC_TIMEOUT or (rc != 0 and not stdout.strip()):
            out.fail(describe_failure(argv, rc, stdout, stderr))
            return out.finish("")
        parsed = PARSERS["dcgmi-diag"](stdout)
        tests = parsed.get("tests") or []
        out.metric("tests_run", len(tests), "count")
        for t in tests:
            out.evidence(
                f"{t.get('name')}: {t.get('status')}"
                + (f" ({'; '.join(t.get('messages') or [])})" if t.get("messages") else "")
            )
        if parsed.get("error"):
            out.fail(f"dcgmi diag -r {level}: {parsed['error']}")
        failed = list(parsed.get("failed") or [])
        if failed:
            out.fail(f"dcgmi diag -r {level}: failed {', '.join(failed)}")
        if not tests:
            out.fail(f"dcgmi diag -r {level} reported no tests (rc {rc}): {tail(stderr or stdout)}")
        elif rc != 0 and not failed:
            out.fail(
                f"dcgmi diag -r {level} exited rc {rc} (226: NVVS error, 205: isolate the GPU) with no failed test listed"
            )
        return out.finish(f"dcgmi diag -r {level}: {len(tests)} test(s) passed")


# gpu-burn's compare kernel, next to its binary: compare.fatbin since wilicc/gpu-burn dfc3042 (2026-05-27),
# compare.ptx before (gpu_burn-drv.cpp COMPARE_KERNEL).
COMPARE_KERNELS = ("compare.fatbin", "compare.ptx")


def compare_kernel(gpu_burn: str) -> Optional[str]:
    """The compare kernel file beside the gpu_burn binary (resolved through PATH), or None."""
    import shutil

    binary = gpu_burn if os.sep in gpu_burn else (shutil.which(gpu_burn) or gpu_burn)
    folder = os.path.dirname(os.path.realpath(binary))
    for name in COMPARE_KERNELS:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None


class GpuBurn(Check):
    id = "gpu-burn"
    group = "burnin"
    profiles = ("full",)
    needs = ("gpu", "gpu-burn")
    measures = (
        "gpu-burn -c <its compare kernel> for durations.burnin_seconds: every GPU reports OK (read from its output; it exits 0 even "
        "when a GPU is faulty); per-GPU Gflop/s from its progress records as rate_device_<i>"
    )

    def applies(self, config) -> Optional[str]:
        reason = super().applies(config)
        if reason:
            return reason
        return None if config.gpu_burn_path else "not applicable: NODE.json sets no gpu_burn.path"

    def run(self, ctx: Context) -> CheckResult:
        from validators.parsers import PARSERS

        out = Outcome(self.id)
        seconds = ctx.config.duration("burnin_seconds")
        path = ctx.config.gpu_burn_path or "gpu_burn"
        kernel = compare_kernel(path)
        if kernel is None:
            out.fail(
                f"gpu-burn: no compare kernel ({' or '.join(COMPARE_KERNELS)}) next to {path}: gpu_burn loads it "
                'from its working directory and would abort with "couldn\'t find compare kernel"; build gpu-burn '
                "there (make) or point gpu_burn.path at the built binary"
            )
            return out.finish("")
        # -c: the compare kernel by its full path (gpu-burn's own option since 2023-02-13; without it the
        # file is looked up relative to the working directory, which is the suite's, not gpu_burn's).
        argv = [path, "-c", kernel, str(int(seconds))]
        out.command(argv)
        rc, stdout, stderr = ctx.run(argv, seconds + ctx.config.duration("workload_timeout_seconds"))
        # gpu_burn prints "Couldn't init a GPU test: ..." on stderr: the parser reads both.
        parsed = PARSERS["gpu-burn"](stdout + "\n" + stderr)
        gpus = parsed.get("gpus") or []
        for g in gpus:
            rate = g.get("gflops_median")
            out.evidence(
                f"GPU {g.get('index')}: {'OK' if g.get('ok') else 'FAULTY'} errors={g.get('errors')}"
                + (f", {rate:g} GFLOP/s (median of its progress records)" if rate is not None else "")
            )
            # Per-device rate for the fleet judge (clusterforge/certify/fleet/metrics.py): a node's
            # figure is its worst GPU.
            if rate is not None:
                out.metric(f"rate_device_{g.get('index')}", rate, "GFLOP/s")
            if not g.get("ok"):
                out.fail(f"gpu-burn: GPU {g.get('index')} FAULTY ({g.get('errors')} errors)")
        if parsed.get("error"):
            out.fail(f"gpu-burn: {parsed['error']}")
        if not parsed.get("complete"):
            out.fail(f"gpu-burn did not complete (rc {rc}): {tail(stderr or stdout)}")
        elif not parsed.get("ok") and not out.failures:
            out.fail(f"gpu-burn did not report every GPU OK (rc {rc})")
        if len(gpus) != ctx.config.gpu_count:
            out.fail(f"gpu-burn reported {len(gpus)} GPU(s), NODE.json expects {ctx.config.gpu_count}")
        return out.finish(f"gpu-burn {int(seconds)} s: {len(gpus)} GPU(s) OK")
