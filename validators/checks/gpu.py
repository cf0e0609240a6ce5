"""Preflight checks read from ``nvidia-smi -q -x``: inventory, health, PCIe link, throttle."""

from __future__ import annotations

import re
from typing import Any, List, Optional

from validators.checks.base import NVIDIA_SMI_XML, Check, Context
from validators.result import CheckResult, Outcome
from validators.runner import describe_failure

ALL = ("quick", "standard", "full")


def truthy(value: Any) -> bool:
    """Parser fields may be bool, a count, or the tool's word (Yes / Enabled / Pending)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value > 0
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "true", "enabled", "pending", "1")
    return False


def gpu_label(i: int, gpu: dict) -> str:
    return f"GPU {i} ({gpu.get('bus_id') or '?'})"


def _gpus(ctx: Context, out: Outcome, parsed: Optional[dict] = None) -> Optional[List[dict]]:
    parsed = parsed if parsed is not None else ctx.nvidia_smi(out)
    if parsed is None:
        return None
    gpus = parsed.get("gpus") or []
    if not gpus:
        out.fail("nvidia-smi lists no GPU")
        return None
    return gpus


class GpuInventory(Check):
    id = "gpu-inventory"
    group = "preflight"
    profiles = ALL
    needs = ("gpu",)
    measures = "GPU count and model (nvidia-smi) equal NODE.json gpu.count and gpu.model"

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        cfg = ctx.config
        out.limit("gpu.count", cfg.gpu_count, "count")
        parsed = ctx.nvidia_smi(out)
        gpus = _gpus(ctx, out, parsed)
        if parsed is None or gpus is None:
            return out.finish("")
        out.metric("gpu_count", len(gpus), "count")
        # A GPU that fell off the bus is often only a failure line beside the GPUs that were read.
        for line in parsed.get("failures") or []:
            out.fail(f"nvidia-smi: {line}")
        if len(gpus) != cfg.gpu_count:
            out.fail(f"found {len(gpus)} GPU(s), NODE.json expects {cfg.gpu_count}")
        model = (cfg.gpu_model or "").lower()
        for i, gpu in enumerate(gpus):
            name = gpu.get("name") or "?"
            # UUID and serial in the evidence: `invoke replace` and `status` tell a GPU handed back
            # from them (clusterforge/rollout/identity.py reads these lines).
            ids = [f"uuid {gpu['uuid']}"] if gpu.get("uuid") else []
            ids += [f"serial {gpu['serial']}"] if gpu.get("serial") else []
            out.evidence(f"{gpu_label(i, gpu)}: {name}" + (f", {', '.join(ids)}" if ids else ""))
            if model not in name.lower():
                out.fail(f"{gpu_label(i, gpu)} is {name!r}, NODE.json expects model {cfg.gpu_model}")
        return out.finish(f"{len(gpus)} x {cfg.gpu_model}")


class GpuHealth(Check):
    id = "gpu-health"
    group = "preflight"
    profiles = ALL
    needs = ("gpu",)
    measures = (
        "per GPU: persistence mode on, uncorrected volatile ECC = 0, no pending or failed row remap, "
        "no pending retired pages"
    )

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        gpus = _gpus(ctx, out)
        if gpus is None:
            return out.finish("")
        ecc_total = 0
        for i, gpu in enumerate(gpus):
            label = gpu_label(i, gpu)
            persistence = gpu.get("persistence_mode")
            if persistence is None:
                out.warn(f"{label}: nvidia-smi does not report persistence mode")
            elif not truthy(persistence):
                out.fail(
                    f"{label}: persistence mode is off, must be Enabled (nvidia-smi -pm 1 / nvidia-persistenced)"
                )
            ecc = gpu.get("ecc_uncorrected_volatile")
            if isinstance(ecc, int) and ecc > 0:
                ecc_total += ecc
                out.fail(f"{label}: {ecc} uncorrected volatile ECC error(s)")
            if truthy(gpu.get("remapped_rows_pending")):
                out.fail(f"{label}: row remap pending (reset the GPU; remaps are applied at reset)")
            if truthy(gpu.get("remapped_rows_failure")):
                out.fail(f"{label}: row remap failure (the GPU has run out of spare rows: replace it)")
            if truthy(gpu.get("retired_pages_pending")):
                out.fail(f"{label}: retired pages pending (reset the GPU)")
            out.evidence(
                f"{label}: persistence={gpu.get('persistence_mode')} ecc_uncorrected={ecc} "
                f"remap_pending={gpu.get('remapped_rows_pending')} remap_failure={gpu.get('remapped_rows_failure')} "
                f"retired_pending={gpu.get('retired_pages_pending')}"
            )
        out.metric("ecc_uncorrected_volatile", ecc_total, "count")
        out.limit("ecc_uncorrected_volatile", 0, "count")
        return out.finish(f"{len(gpus)} GPU(s) healthy: persistence on, no ECC errors, no pending remaps")


def link_problems(gpus: List[dict], judge_gen: bool) -> List[str]:
    problems = []
    for i, gpu in enumerate(gpus):
        label = gpu_label(i, gpu)
        for what, judged in (("width", True), ("gen", judge_gen)):
            cur, top = gpu.get(f"pcie_{what}_current"), gpu.get(f"pcie_{what}_max")
            if judged and isinstance(cur, int) and isinstance(top, int) and cur < top:
                unit = "x" if what == "width" else "Gen"
                problems.append(f"{label}: PCIe link {what} {unit}{cur} below max {unit}{top}")
    return problems


class PcieLink(Check):
    id = "pcie-link"
    group = "preflight"
    profiles = ALL
    needs = ("gpu",)
    measures = (
        "per GPU: PCIe link width at max, and link generation at max under load (an idle link "
        "downclocks, so a low generation is re-read while the pcie_load workload copies to every GPU)"
    )

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        gpus = _gpus(ctx, out)
        if gpus is None:
            return out.finish("")
        for problem in link_problems(gpus, judge_gen=False):
            out.fail(problem)
        low_gen = [p for p in link_problems(gpus, judge_gen=True) if " gen " in p]
        if low_gen:
            out.evidence("idle: " + "; ".join(low_gen))
            seconds = ctx.config.duration("pcie_load_seconds")
            argv = [
                ctx.python,
                ctx.workload("pcie_load.py"),
                "--seconds",
                f"{seconds:g}",
                "--sample",
                *NVIDIA_SMI_XML,
            ]
            out.command(argv)
            rc, stdout, stderr = ctx.run(argv, seconds + ctx.timeout)
            if rc != 0:
                out.fail(
                    f"PCIe generation below max at idle and the load run failed: {describe_failure(argv, rc, stdout, stderr)}"
                )
            else:
                from validators.parsers import PARSERS

                loaded = PARSERS["nvidia-smi"](stdout).get("gpus") or []
                for problem in link_problems(loaded, judge_gen=True):
                    if " gen " in problem:
                        out.fail(problem + " under load")
        for i, gpu in enumerate(gpus):
            out.evidence(
                f"{gpu_label(i, gpu)}: Gen{gpu.get('pcie_gen_current')}/{gpu.get('pcie_gen_max')} "
                f"x{gpu.get('pcie_width_current')}/{gpu.get('pcie_width_max')}"
            )
        return out.finish(f"{len(gpus)} GPU link(s) at max width and generation")


# Reasons that mean the hardware is slowing the GPU down; SW power cap, idle and application
# clocks are the normal state of an idle or capped GPU (nvidia-smi -q "Clocks Event Reasons").
_BAD_REASON = re.compile(r"hw|thermal|power_brake", re.IGNORECASE)


def normalise_reason(name: str) -> str:
    n = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return re.sub(r"^clocks_(event|throttle)_reasons?_", "", n)


def bad_throttle(reasons: List[str]) -> List[str]:
    return [r for r in reasons if _BAD_REASON.search(normalise_reason(r))]


class GpuThrottle(Check):
    id = "gpu-throttle"
    group = "preflight"
    profiles = ALL
    needs = ("gpu",)
    measures = "no GPU has an active HW slowdown, HW/SW thermal slowdown or power-brake clocks event reason"

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        gpus = _gpus(ctx, out)
        if gpus is None:
            return out.finish("")
        for i, gpu in enumerate(gpus):
            active = list(gpu.get("throttle_active") or [])
            out.evidence(f"{gpu_label(i, gpu)}: active reasons {', '.join(active) or 'none'}")
            bad = bad_throttle(active)
            if bad:
                out.fail(f"{gpu_label(i, gpu)}: throttled by {', '.join(bad)}")
        return out.finish(f"{len(gpus)} GPU(s): no hardware or thermal throttle active")
