"""The validators' GPU paths on one real GPU, end to end, with every fault hook: one prepared run.

    benchmarks/gpu_device_check.sh [--dry-run] [--out DIR]

Needs one machine with a GPU (one is enough), CUDA's compiler (nvcc), PyTorch with CUDA and the NCCL
library from its pip wheel (nvidia-nccl-cu12 / -cu13, which torch's CUDA wheels bring), no network:
nccl-tests is built from a source tree or tarball on disk (NCCL_TESTS_SRC, else
.clusterforge/cache/nccl-tests-*.tar.gz; `git archive` of NVIDIA/nccl-tests at v2.14.1 makes one).
It runs, each step bounded, the whole in under 8 minutes:

1. the GPU checks as a node runs them (python3 -m validators run): python-runtime, gpu-inventory,
   gpu-health, pcie-link, gpu-throttle, xid-scan, matmul-burnin (its TFLOP/s timed without the
   comparison and with it), checkpoint-restart on the GPU;
2. nccl-tests' all_reduce_perf built from source against the wheel's NCCL, run on the GPUs here and
   read by the validators' parser;
3. the fault hooks, each of which must fail its check with its reason: a non-deterministic device,
   a corrupted checkpoint, a dropped optimizer state, a device that vanishes before the barrier
   (named in < 30 s, no worker left), a competing process on a device (its rate under the floor);
4. one summary line, and every figure in OUT/device-check.json.

--dry-run does the same on the CPU path (no GPU, no nvcc: the GPU-only checks skip, nccl-tests is
not built); the tests run it, so the script's own control flow is tested where no GPU is.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GPU_CHECKS = (
    "python-runtime,gpu-inventory,gpu-health,pcie-link,gpu-throttle,xid-scan,matmul-burnin,checkpoint-restart"
)
# Checks whose verdict depends on how the machine was set up, not on this code: reported, not required
# (a rented VM may run without persistence mode, or pass a GPU through with a narrower PCIe link).
SETUP_DEPENDENT = {"gpu-health", "pcie-link", "gpu-throttle", "xid-scan"}


class Step:
    def __init__(self, name: str, ok: bool | None, detail: str, seconds: float) -> None:
        self.name, self.ok, self.detail, self.seconds = name, ok, detail, seconds

    def line(self) -> str:
        mark = {True: "ok  ", False: "FAIL", None: "skip"}[self.ok]
        return f"{mark} {self.name} ({self.seconds:.0f} s): {self.detail}"


class DeviceCheck:
    def __init__(self, out: Path, dry_run: bool, python: str) -> None:
        self.out, self.dry_run, self.python = out, dry_run, python
        self.steps: list[Step] = []
        self.figures: dict[str, Any] = {}
        self.shared = out / "shared"
        self.shared.mkdir(parents=True, exist_ok=True)
        self.gpus = [] if dry_run else self._gpus()

    # -- helpers ---------------------------------------------------------------------------------

    def _gpus(self) -> list[str]:
        try:
            proc = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return []
        return (
            [line.strip() for line in proc.stdout.splitlines() if line.strip()]
            if proc.returncode == 0
            else []
        )

    def node_json(self, name: str, thresholds: dict[str, float] | None = None) -> Path:
        cfg: dict[str, Any] = {
            "schema_version": 1,
            "node": "device-check",
            "instance_type": "this-machine",
            "shared_storage": {"path": str(self.shared), "require_mount": False},
            "thresholds": dict(thresholds or {}),
        }
        if self.gpus:
            cfg["gpu"] = {
                "count": len(self.gpus),
                "model": self.gpus[0].split()[-1] if self.gpus[0] else "GPU",
            }
            cfg["durations"] = {
                "burnin_seconds": 20, "checkpoint_steps": 6, "telemetry_interval_seconds": 2,
                "pcie_load_seconds": 5, "matmul_setup_seconds": 120, "workload_timeout_seconds": 180,
            }  # fmt: skip
            cfg["sizes"] = {"matmul_dim": 8192, "checkpoint_width": 1024, "checkpoint_bytes": 64 << 20}
        else:
            cfg["durations"] = {
                "burnin_seconds": 2, "checkpoint_steps": 4, "matmul_setup_seconds": 60,
                "workload_timeout_seconds": 120,
            }  # fmt: skip
            cfg["sizes"] = {
                "cpu_workers": 2,
                "cpu_matmul_dim": 64,
                "checkpoint_width": 32,
                "checkpoint_bytes": 0,
            }
        path = self.out / f"{name}.node.json"
        path.write_text(json.dumps(cfg, indent=2))
        return path

    def validators(
        self,
        name: str,
        checks: str,
        thresholds: dict[str, float] | None = None,
        env: dict[str, str] | None = None,
    ) -> tuple[dict[str, dict[str, Any]], float]:
        """One suite run; {check id: its report entry} and the seconds it took."""
        config = self.node_json(name, thresholds)
        out = self.out / name
        argv = [self.python, "-m", "validators", "run", "--profile", "quick", "--checks", checks]
        argv += ["--config", str(config), "--out", str(out)]
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        start = time.monotonic()
        subprocess.run(argv, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=420, check=False)
        took = time.monotonic() - start
        try:
            report = json.loads((out / "report.json").read_text())
        except (OSError, ValueError):
            return {}, took
        return {c["id"]: c for c in report.get("checks") or []}, took

    def add(self, name: str, ok: bool | None, detail: str, seconds: float) -> None:
        step = Step(name, ok, detail, seconds)
        self.steps.append(step)
        print(step.line(), flush=True)

    # -- 1. the checks as a node runs them -------------------------------------------------------

    def clean_run(self) -> None:
        checks, took = self.validators("clean", GPU_CHECKS)
        if not checks:
            self.add("validators", False, "no report.json (the suite did not run)", took)
            return
        for cid, c in checks.items():
            status = c.get("status")
            required = cid not in SETUP_DEPENDENT
            ok: bool | None = status in ("pass", "warn") if required or status == "pass" else None
            if status == "skip":
                ok = None
            self.add(
                f"check {cid}", ok, f"{status}: {c.get('summary', '')[:160]}", c.get("duration_s") or 0.0
            )
        matmul = checks.get("matmul-burnin", {}).get("metrics", {})
        for key in ("rate_median", "rate_with_check_median"):
            if key in matmul:
                self.figures[f"matmul.{key}"] = matmul[key]
        ckpt = checks.get("checkpoint-restart", {}).get("metrics", {})
        for key in ("ckpt_write_rate", "ckpt_read_rate", "write_ratio", "read_ratio"):
            if key in ckpt:
                self.figures[f"checkpoint.{key}"] = ckpt[key]
        self.figures["clean_run_seconds"] = round(took, 1)

    # -- 2. nccl-tests from source against the wheel's NCCL ---------------------------------------

    def nccl_tests(self) -> None:
        start = time.monotonic()
        nvcc = shutil.which("nvcc") or next(iter(glob.glob("/usr/local/cuda*/bin/nvcc")), None)
        if self.dry_run or not self.gpus or nvcc is None:
            why = "dry run" if self.dry_run else "no GPU" if not self.gpus else "no nvcc"
            self.add("nccl-tests", None, f"not built: {why}", 0.0)
            return
        nccl = self._wheel_nccl()
        source = self._nccl_tests_source()
        if nccl is None or source is None:
            what = "the NCCL wheel (nvidia-nccl-cu12/-cu13)" if nccl is None else "nccl-tests source"
            self.add("nccl-tests", False, f"not built: no {what} on this machine", time.monotonic() - start)
            return
        build = self.out / "nccl-tests-build"
        cuda_home = str(Path(nvcc).resolve().parents[1])
        make = ["make", "-j", str(os.cpu_count() or 4), "-C", str(source / "src"), f"BUILDDIR={build}",
                f"CUDA_HOME={cuda_home}", f"NCCL_HOME={nccl}", f"{build}/all_reduce_perf"]  # fmt: skip
        gencode = self._gencode()
        if gencode:  # only this GPU's architecture: the default list compiles a dozen (minutes)
            make.append(f"NVCC_GENCODE={gencode}")
        proc = subprocess.run(make, capture_output=True, text=True, timeout=300, check=False)
        binary = build / "all_reduce_perf"
        if proc.returncode != 0 or not binary.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            self.add("nccl-tests", False, f"build failed: {' | '.join(tail)}", time.monotonic() - start)
            return
        env = {**os.environ, "LD_LIBRARY_PATH": f"{nccl}/lib:" + os.environ.get("LD_LIBRARY_PATH", "")}
        argv = [str(binary), "-b", "8M", "-e", "256M", "-f", "2", "-g", str(len(self.gpus)), "-c", "1"]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
        sys.path.insert(0, str(ROOT))
        from validators.parsers.nccl_tests import parse_nccl_tests

        parsed = parse_nccl_tests(run.stdout)
        rows = parsed.get("rows") or []
        ok = run.returncode == 0 and parsed.get("complete") and not parsed.get("refused")
        top = rows[-1]["out_of_place"]["busbw"] if rows else None
        self.figures["nccl_tests.all_reduce.busbw_top"] = top
        self.add(
            "nccl-tests", bool(ok) and bool(rows),
            f"all_reduce_perf -g {len(self.gpus)} built against {nccl}: rc {run.returncode}, {len(rows)} rows, "
            f"out-of-bounds {parsed.get('out_of_bounds')}, busbw at 256 MiB {top} GB/s",
            time.monotonic() - start,
        )  # fmt: skip

    def _gencode(self) -> str:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        caps = sorted({line.strip().replace(".", "") for line in proc.stdout.splitlines() if line.strip()})
        return " ".join(f"-gencode=arch=compute_{c},code=sm_{c}" for c in caps if c.isdigit())

    def _wheel_nccl(self) -> str | None:
        """An NCCL_HOME from the pip wheel: its include/ and a lib/ with the libnccl.so the link needs."""
        code = "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) or list(nvidia.nccl.__path__)[0])"
        proc = subprocess.run([self.python, "-c", code], capture_output=True, text=True, check=False)
        wheel = Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None
        if wheel is None or not (wheel / "include" / "nccl.h").exists():
            return None
        home = self.out / "nccl-home"
        (home / "lib").mkdir(parents=True, exist_ok=True)
        if not (home / "include").exists():
            (home / "include").symlink_to(wheel / "include")
        for lib in (wheel / "lib").glob("libnccl.so*"):
            for name in {lib.name, "libnccl.so"}:
                target = home / "lib" / name
                if not target.exists():
                    target.symlink_to(lib)
        return str(home)

    def _nccl_tests_source(self) -> Path | None:
        given = os.environ.get("NCCL_TESTS_SRC")
        candidates = [Path(given)] if given else []
        candidates += sorted((ROOT / ".clusterforge" / "cache").glob("nccl-tests-*.tar.gz"))
        for cand in candidates:
            if cand.is_dir() and (cand / "src" / "Makefile").exists():
                return cand
            if cand.is_file():
                dest = self.out / "nccl-tests-src"
                dest.mkdir(exist_ok=True)
                subprocess.run(["tar", "-xzf", str(cand), "-C", str(dest)], check=False)
                found = next(iter(dest.glob("*/src/Makefile")), None)
                if found is not None:
                    return found.parent.parent
        return None

    # -- 3. the fault hooks ----------------------------------------------------------------------

    def fault(self, hook: str, check: str, expect: str, thresholds: dict[str, float] | None = None) -> None:
        faults = self.out / f"faults-{hook}"
        faults.mkdir(exist_ok=True)
        env = {"VALIDATORS_FAULT_DIR": str(faults), "CLUSTERFORGE_DEVICE_CHECK": uuid.uuid4().hex}
        if hook == "drop-optimizer":
            env["VALIDATORS_TEST_FAULT"] = "drop-optimizer"
        else:
            (faults / hook).write_text("0\n")
        checks, took = self.validators(f"fault-{hook}", check, thresholds, env)
        c = checks.get(check) or {}
        text = c.get("summary", "") + " " + " ".join(c.get("evidence", {}).get("lines", []))
        caught = c.get("status") == "fail" and expect in text
        detail = f"{c.get('status')}: {c.get('summary', '(no report)')[:200]}"
        if hook == "vanished-device":
            left = leftovers(env["CLUSTERFORGE_DEVICE_CHECK"])
            # On a GPU the failing device is named in < 30 s (the suite's own start included). The dry
            # run's two CPU workers import torch on a shared 2-core machine: timed, not bounded.
            caught = caught and not left and (took < 30 or self.dry_run)
            detail += f"; named in {took:.1f} s; {len(left)} process(es) left"
            self.figures["vanished_device_seconds"] = round(took, 1)
        if hook == "competing-process" and self.dry_run:
            # Two CPU workers and a spinning competitor on a shared machine: the verdict is noise here.
            self.add(
                f"fault {hook}", None, detail + " (dry run: the hook ran; its verdict needs a GPU)", took
            )
            return
        self.add(f"fault {hook}", caught, detail, took)

    def faults(self) -> None:
        gpu = bool(self.gpus)
        self.fault("nondeterministic", "matmul-burnin", "result changed across repetitions")
        self.fault("vanished-device", "matmul-burnin", "(before the start)")
        clean = self.figures.get("matmul.rate_median", {}).get("value")
        floor_key = "matmul.tflops_min" if gpu else "matmul.cpu_gflops_min"
        floor = {floor_key: round(0.8 * clean, 3)} if clean else None
        self.fault("competing-process", "matmul-burnin", "below the floor", floor)
        self.fault("corrupt-checkpoint", "checkpoint-restart", "changed on")
        self.fault("drop-optimizer", "checkpoint-restart", "differ after resume")

    # -- 4. summary ------------------------------------------------------------------------------

    def summary(self, seconds: float) -> str:
        required = [s for s in self.steps if s.ok is not None]
        passed = [s for s in required if s.ok]
        faults = [s for s in self.steps if s.name.startswith("fault ") and s.ok is not None]
        rate = self.figures.get("matmul.rate_median", {})
        checked = self.figures.get("matmul.rate_with_check_median", {})
        device = (
            f"{len(self.gpus)}x {self.gpus[0]}"
            if self.gpus
            else "CPU (dry run)"
            if self.dry_run
            else "no GPU"
        )
        verdict = "PASS" if len(passed) == len(required) else "FAIL"
        return (
            f"gpu-device-check: {verdict} {len(passed)}/{len(required)} on {device}: matmul "
            f"{rate.get('value')} {rate.get('unit', '')} alone, {checked.get('value')} with the comparison; "
            f"faults caught {sum(s.ok is True for s in faults)}/{len(faults)}; "
            f"{len(self.steps) - len(required)} skipped; {seconds:.0f} s"
        )


def leftovers(marker: str) -> list[int]:
    """Processes still running with this run's marker in their environment (workers, competitors)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if f"CLUSTERFORGE_DEVICE_CHECK={marker}".encode() in environ and state != "Z":
            found.append(int(name))
    return found


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--dry-run", action="store_true", help="the CPU path: no GPU, no nvcc")
    ap.add_argument("--out", help="folder for reports and device-check.json (default: a temp folder)")
    ap.add_argument("--python", default=sys.executable, help="the Python with torch the suite runs on")
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="gpu-device-check-"))
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    check = DeviceCheck(out, args.dry_run, args.python)
    if not args.dry_run and not check.gpus:
        print("gpu-device-check: FAIL: nvidia-smi sees no GPU here (use --dry-run for the CPU path)")
        return 1
    check.clean_run()
    check.nccl_tests()
    check.faults()
    line = check.summary(time.monotonic() - start)
    (out / "device-check.json").write_text(
        json.dumps(
            {"summary": line, "figures": check.figures, "steps": [vars(s) for s in check.steps]}, indent=2
        )
        + "\n"
    )
    print(line)
    return 0 if line.split()[1] == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
