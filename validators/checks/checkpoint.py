"""checkpoint-restart: save with torch.distributed.checkpoint, SIGKILL, resume, compare bit for bit."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import threading
from typing import Any, Dict, List, Optional, Tuple

from validators.checks.base import Check, Context
from validators.checks.system import write_read
from validators.faults import active_fault, fault_path
from validators.result import CheckResult, Outcome
from validators.runner import end_group


def last_json(text: str) -> Optional[Dict[str, Any]]:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def tail(text: str, n: int = 1) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:]) if lines else "(no output)"


def finish_group(proc: "subprocess.Popen[str]", timeout: float) -> Tuple[str, str]:
    """Wait for a workload started in its own session; on timeout SIGKILL its whole group (the
    ranks of a multi-rank run are its children). A rank left behind after a normal exit is ended too."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return out, (err or "") + f"\ntimed out after {timeout:g} s (workload_timeout_seconds)"
    end_group(proc.pid, grace=1.0)
    return out, err


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for piece in iter(lambda: fh.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


# ckpt_train.py's model is Linear(w, w), Linear(w, w), Linear(w, 1) in fp32 with AdamW: the
# checkpoint holds the parameters (~2 w^2 floats) and two optimizer moments of the same size,
# so ~3 x 2 w^2 x 4 B = 24 w^2 bytes.
CKPT_BYTES_PER_WIDTH_SQUARED = 24


def width_for_bytes(size: int) -> int:
    """The model width whose checkpoint is about ``size`` bytes (0 for none)."""
    return math.ceil(math.sqrt(size / CKPT_BYTES_PER_WIDTH_SQUARED)) if size > 0 else 0


def checkpoint_width(config) -> int:
    """sizes.checkpoint_bytes sizes the model so that the rates measure the storage, not the
    per-file overhead of a tiny checkpoint; sizes.checkpoint_width is a floor (0 bytes: width alone)."""
    return max(int(config.size("checkpoint_width")), width_for_bytes(int(config.size("checkpoint_bytes"))))


class CheckpointRestart(Check):
    id = "checkpoint-restart"
    group = "checkpoint"
    profiles = ("quick", "standard", "full")
    needs = ("torch",)
    measures = (
        "a deterministic model trained N steps, checkpointed at step k with torch.distributed.checkpoint "
        "(fsync) on the shared storage, SIGKILLed after k, resumed to N: losses after k, parameters and "
        "optimizer state bit-identical to an uninterrupted run; sha256 per shard; checkpoint write/read "
        "rate as a ratio of plain sequential write/read of the same size on the same path"
    )

    def applies(self, config) -> Optional[str]:
        if not config.shared_storage_path:
            return "not applicable: NODE.json sets no shared_storage.path to checkpoint to"
        return None

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        cfg = ctx.config
        steps = int(cfg.duration("checkpoint_steps"))
        save_step = int(cfg.durations.get("checkpoint_save_step") or steps // 2)
        if not 1 <= save_step < steps:
            out.fail(
                f"durations.checkpoint_save_step = {save_step} must be between 1 and checkpoint_steps - 1 ({steps - 1})"
            )
            return out.finish("")
        if cfg.has_gpu and ctx.nvidia_smi(out) is None:  # nvidia-smi's own reason, before a slow torch start
            return out.finish("")
        root = cfg.shared_storage_path or ""
        if not os.path.isdir(root):
            out.fail(f"{root}: shared storage path does not exist")
            return out.finish("")
        ckpt = os.path.join(root, f".validators-ckpt-{cfg.node}-{os.getpid()}")
        shutil.rmtree(ckpt, ignore_errors=True)
        try:
            self._run(ctx, out, ckpt, steps, save_step)
        finally:
            shutil.rmtree(ckpt, ignore_errors=True)
        return out.finish(
            f"resume from step {save_step} after SIGKILL bit-identical to the reference over steps {save_step + 1}..{steps}"
        )

    def _argv(self, ctx: Context, mode: str, steps: int, extra: List[str]) -> List[str]:
        device = "cuda" if ctx.config.has_gpu else "cpu"
        width = str(checkpoint_width(ctx.config))
        world = str(max(1, ctx.config.size("checkpoint_world_size")))
        return [
            ctx.python,
            ctx.workload("ckpt_train.py"),
            "--mode",
            mode,
            "--steps",
            str(steps),
            "--width",
            width,
            "--device",
            device,
            "--world-size",
            world,
            *extra,
        ]

    def _run(self, ctx: Context, out: Outcome, ckpt: str, steps: int, save_step: int) -> None:
        timeout = ctx.config.duration("workload_timeout_seconds")
        ref_argv = self._argv(ctx, "reference", steps, [])
        kill_argv = self._argv(ctx, "kill", steps, ["--save-step", str(save_step), "--ckpt", ckpt])
        out.command(ref_argv)
        out.command(kill_argv)
        # The reference run and the run to be killed go side by side.
        ref = subprocess.Popen(
            ref_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        killed = self._run_and_kill(out, kill_argv, timeout)
        ref_out, ref_err = finish_group(ref, timeout)
        if ref.returncode != 0:
            out.fail(f"reference run failed (rc {ref.returncode}): {tail(ref_err or ref_out)}")
        if killed is None or ref.returncode != 0:
            return
        saved = killed
        shards = sorted(os.listdir(ckpt)) if os.path.isdir(ckpt) else []
        if not shards:
            out.fail(f"no checkpoint files in {ckpt} after the save was reported")
            return
        saved_sha = {name: sha256_file(os.path.join(ckpt, name)) for name in shards}
        for name in shards:
            out.evidence(f"shard {name}: sha256 {saved_sha[name]}")
        self._corrupt_hook(out, ckpt, shards)
        resume_argv = self._argv(ctx, "resume", steps, ["--ckpt", ckpt])
        out.command(resume_argv)
        res = subprocess.Popen(
            resume_argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        res_out, res_err = finish_group(res, timeout)
        # What the resume read must be what the save wrote: a changed shard is the storage's fault.
        for name in shards:
            now = (
                sha256_file(os.path.join(ckpt, name))
                if os.path.exists(os.path.join(ckpt, name))
                else "missing"
            )
            if now != saved_sha[name]:
                out.fail(
                    f"checkpoint shard {name} changed on {os.path.dirname(ckpt)} between save and resume "
                    f"(sha256 {saved_sha[name][:12]} -> {now[:12]})"
                )
        if res.returncode != 0:
            out.fail(f"resume run failed (rc {res.returncode}): {tail(res_err or res_out)}")
            return
        reference, resumed = last_json(ref_out) or {}, last_json(res_out) or {}
        for name, run in (("reference", reference), ("resume", resumed)):
            if "error" in run:
                out.fail(f"{name} run: {run['error']}")
            if run.get("ranks_agree") is False:
                out.fail(
                    f"{name} run: ranks hold different parameters or optimizer state (replicas diverged)"
                )
        out.metric("world_size", int(resumed.get("world_size") or 1), "ranks")
        self._compare(out, reference, resumed, save_step, steps)
        self._rates(ctx, out, ckpt, saved, resumed)

    def _corrupt_hook(self, out: Outcome, ckpt: str, shards: List[str]) -> None:
        """The ``corrupt-checkpoint`` test hook (validators/faults.py): flip one byte in the middle
        of the largest shard after the save, as storage that corrupts data at rest would."""
        if active_fault("corrupt-checkpoint") is None:
            return
        name = max(shards, key=lambda n: os.path.getsize(os.path.join(ckpt, n)))
        path = os.path.join(ckpt, name)
        with open(path, "r+b") as fh:
            fh.seek(os.path.getsize(path) // 2)
            byte = fh.read(1)
            fh.seek(-1, os.SEEK_CUR)
            fh.write(bytes([byte[0] ^ 0xFF]))
        out.evidence(
            f"FAULT INJECTION ACTIVE ({fault_path('corrupt-checkpoint')}): one byte of shard {name} flipped "
            "after the save (a test hook; remove the file on a real node)"
        )
        out.metric("fault_injection", 1, "count")

    def _run_and_kill(self, out: Outcome, argv: List[str], timeout: float) -> Optional[Dict[str, Any]]:
        """Start the training run, wait for its ``SAVED k`` line, SIGKILL it; return its save record."""
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        lines: List[str] = []
        saved = threading.Event()

        def reader() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("SAVED "):
                    saved.set()
            saved.set()  # EOF: the process ended without being killed

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        saved.wait(timeout)
        exited_alone = proc.poll() is not None
        if not exited_alone:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        thread.join(5)
        stderr = proc.stderr.read() if proc.stderr else ""
        text = "".join(lines)
        if not any(line.startswith("SAVED ") for line in lines):
            out.fail(
                f"training run never reported its checkpoint (rc {proc.returncode}): {tail(stderr or text)}"
            )
            return None
        if exited_alone or proc.returncode != -signal.SIGKILL:
            out.fail(
                f"training run was not killed by SIGKILL (rc {proc.returncode}); the restart would not be tested"
            )
            return None
        out.evidence(
            f"training process {proc.pid} killed with SIGKILL after the checkpoint (rc {proc.returncode})"
        )
        out.metric("killed_rc", proc.returncode, "rc")
        record: Dict[str, Any] = next(
            (json.loads(line) for line in lines if line.startswith('{"saved_step"')), {}
        )
        return record

    def _compare(
        self, out: Outcome, ref: Dict[str, Any], res: Dict[str, Any], save_step: int, steps: int
    ) -> None:
        if res.get("resumed_from") != save_step:
            out.fail(f"resume started after step {res.get('resumed_from')}, expected {save_step}")
        ref_losses, res_losses = ref.get("losses") or {}, res.get("losses") or {}
        for step in range(save_step + 1, steps + 1):
            a, b = ref_losses.get(str(step)), res_losses.get(str(step))
            if a is None or b is None or a != b:
                out.fail(f"loss at step {step} differs after resume: {b} vs reference {a}")
                break
        ref_state, res_state = ref.get("state") or {}, res.get("state") or {}
        if not ref_state:
            out.fail("reference run reported no state digests")
        differ = sorted(k for k in set(ref_state) | set(res_state) if ref_state.get(k) != res_state.get(k))
        if differ:
            kinds = sorted({k.split("/")[0] for k in differ})
            out.fail(
                f"{len(differ)} tensor(s) differ after resume ({', '.join(kinds)}): {', '.join(differ[:4])}"
            )
        out.metric("tensors_compared", len(ref_state), "count")
        out.metric("steps_compared", steps - save_step, "steps")

    def _rates(
        self, ctx: Context, out: Outcome, ckpt: str, saved: Dict[str, Any], resumed: Dict[str, Any]
    ) -> None:
        size = int(saved.get("ckpt_bytes") or 0)
        save_s, load_s = float(saved.get("save_seconds") or 0), float(resumed.get("load_seconds") or 0)
        if not (size and save_s and load_s):
            out.warn("checkpoint rates not reported by the workload")
            return
        plain = os.path.join(os.path.dirname(ckpt), os.path.basename(ckpt) + ".plain")
        try:
            plain_w, plain_r, _, _ = write_read(plain, size)
        finally:
            if os.path.exists(plain):
                os.unlink(plain)
        out.evidence(
            f"checkpoint of {size / (1 << 20):.1f} MiB (model width {checkpoint_width(ctx.config)}, "
            f"sizes.checkpoint_bytes {ctx.config.size('checkpoint_bytes')})"
        )
        rates = {
            "ckpt_write_rate": size / save_s / 1e6,
            "ckpt_read_rate": size / load_s / 1e6,
            "plain_write_rate": size / plain_w / 1e6,
            "plain_read_rate": size / plain_r / 1e6,
        }
        for name, value in rates.items():
            out.metric(name, round(value, 1), "MB/s")
        out.metric("ckpt_bytes", size, "B")
        for kind in ("write", "read"):
            ratio = rates[f"ckpt_{kind}_rate"] / rates[f"plain_{kind}_rate"]
            out.metric(f"{kind}_ratio", round(ratio, 3), "ratio")
            key = f"checkpoint.{kind}_ratio_min"
            floor = ctx.config.threshold(key)
            if floor is not None:
                out.limit(key, floor, "ratio")
                if ratio < floor:
                    out.fail(
                        f"checkpoint {kind} rate is {ratio:.2f} x plain sequential {kind}, below {floor}"
                    )
