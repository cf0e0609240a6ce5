"""Preflight: pinned software versions, and the Python runtime the suite runs on."""

from __future__ import annotations

import re
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from validators.checks.base import Check, Context
from validators.parsers.dpkg import DPKG_PIN_FORMAT, parse_dpkg_status, pin_problems
from validators.result import CheckResult, Outcome
from validators.runner import RC_NOT_FOUND, describe_failure

# Where each pinned component's version is read from, as package-name globs (dpkg or rpm).
# NODE.json ``packages`` replaces an entry. Sources: NVIDIA CUDA repo package names
# (cuda-toolkit-12-8, libnccl2, nvidia-fabricmanager-570, datacenter-gpu-manager-4-core),
# Debian non-free (nvidia-smi, nvidia-cuda-toolkit), Debian/SchedMD Slurm (slurmd, slurm-wlm).
DEFAULT_PACKAGES: Dict[str, List[str]] = {
    "driver": ["nvidia-driver", "nvidia-driver-[0-9]*", "nvidia-smi"],
    "cuda": ["cuda-toolkit-[0-9]*", "nvidia-cuda-toolkit"],
    "nccl": ["libnccl2"],
    "fabric_manager": ["nvidia-fabricmanager-[0-9]*", "nvidia-fabricmanager"],
    "dcgm": ["datacenter-gpu-manager-4-core", "datacenter-gpu-manager"],
    "nvidia_container_toolkit": ["nvidia-container-toolkit"],
    "enroot": ["enroot"],
    "slurm": ["slurmd", "slurm-wlm", "slurm"],
}
# Slurm built from source (roles/slurm, prefix /usr/local) has no package: its slurmd prints
# "slurm 22.05.8" (tests/data/slurm/slurmd-V-source.txt).
SLURMD_VERSION = ("/usr/local/sbin/slurmd", "-V")
_SLURMD_VERSION_RE = re.compile(r"^slurm\s+(\d+\.\d+\.\d+)\s*$", re.MULTILINE)


def parse_slurmd_version(text: str) -> Optional[str]:
    """The version in ``slurmd -V`` output, or None when the text is not that."""
    m = _SLURMD_VERSION_RE.search(text)
    return m.group(1) if m else None


# Components of which several versions may be installed at once: one matching is enough.
COEXISTING = ("cuda",)
EFA_INSTALLED = "/opt/amazon/efa_installed_packages"
_EFA_RE = re.compile(r"#\s*EFA installer version:\s*([0-9][0-9.]*)", re.IGNORECASE)
_DPKG_FORMAT = "${Package}\t${Version}\t${db:Status-Abbrev}\n"


def upstream_version(version: str) -> str:
    """``1:4.2.3-1`` -> ``4.2.3``; ``11.8.89~11.8.0-5~deb12u1`` -> ``11.8.89``;
    ``2.26.2-1+cuda12.8`` -> ``2.26.2``: drop the epoch and the distribution revision."""
    v = version.split(":", 1)[1] if re.match(r"^\d+:", version) else version
    return re.split(r"[-~+]", v, maxsplit=1)[0]


def version_matches(expected: str, found: str) -> bool:
    """Equal, or ``expected`` names fewer components (``12.8`` matches ``12.8.1``).
    ``found`` may carry the package name first (``slurmd 22.05.8-4``)."""
    up = upstream_version(found.split()[-1]) if found.strip() else ""
    return up == expected or up.startswith(expected + ".")


class SoftwareVersions(Check):
    id = "software-versions"
    group = "preflight"
    profiles = ("quick", "standard", "full")
    needs = ()
    measures = (
        "driver (nvidia-smi), CUDA, NCCL, fabric manager, DCGM, Slurm package versions (dpkg-query/rpm) "
        "and the EFA installer version against NODE.json software pins; every package in NODE.json pins "
        "installed at its pinned version and held (dpkg-query ${Status} ${Version})"
    )

    def applies(self, config) -> Optional[str]:
        if config.software or config.pins:
            return None
        return "not applicable: NODE.json pins no software versions"

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        cfg = ctx.config
        checked = 0
        # The driver first: when nvidia-smi cannot talk to it, that is the line to read first.
        for component, expected in sorted(cfg.software.items(), key=lambda kv: (kv[0] != "driver", kv[0])):
            if component == "torch":
                continue  # a Python package, not a system one: python-runtime judges it
            found = self._read(ctx, out, component)
            if found is None:
                continue
            checked += 1
            versions, where = found
            if not versions:
                if cfg.has_gpu:
                    out.fail(f"{component}: expected {expected}, not installed ({where})")
                else:
                    out.evidence(f"{component}: not installed ({where}); not required on a node without GPU")
                continue
            # Every installed package of a component must carry the pin (drift in one of slurmd /
            # slurm-wlm is drift); CUDA toolkits of several versions legitimately sit side by side.
            matching = [v for v in versions if version_matches(expected, v)]
            ok = bool(matching) if component in COEXISTING else len(matching) == len(versions)
            if ok:
                out.evidence(f"{component}: {expected} ok ({where}: {', '.join(versions)})")
            else:
                wrong = [v for v in versions if not version_matches(expected, v)]
                out.fail(f"{component}: expected {expected}, found {', '.join(wrong)} ({where})")
        out.metric("components_checked", checked, "count")
        held = self._pins(ctx, out)
        summary = f"{checked} pinned component(s) match NODE.json"
        if held:
            summary += f", {held} pinned package(s) installed and held"
        return out.finish(summary)

    def _pins(self, ctx: Context, out: Outcome) -> int:
        """NODE.json pins: every package the roles pinned is installed at that version and held.
        All problems go in one reason, so the summary names each package."""
        pins = ctx.config.pins
        if not pins:
            return 0
        argv = ["dpkg-query", "-W", "-f", DPKG_PIN_FORMAT, *sorted({p.package for p in pins})]
        out.command(argv)
        rc, stdout, stderr = ctx.run(argv)
        # Exit 1 when a package is unknown to dpkg (it is then missing from stdout, which the judge reports).
        if rc not in (0, 1):
            out.fail(
                "pinned packages: cannot read their state: " + describe_failure(argv, rc, stdout, stderr)
            )
            return 0
        states = parse_dpkg_status(stdout)
        problems = pin_problems(pins, states)
        out.metric("packages_pinned", len(pins), "count")
        out.metric("packages_pin_failures", len(problems), "count")
        if problems:
            out.fail("; ".join(problems))
        out.evidence(
            *(f"{name}: {st.selection} {st.state} {st.version}" for name, st in sorted(states.items()))
        )
        return len(pins) - len(problems)

    def _read(self, ctx: Context, out: Outcome, component: str) -> Optional[Tuple[List[str], str]]:
        """(versions found, where read) or None when this component cannot be read here."""
        cfg = ctx.config
        if component == "driver" and cfg.has_gpu and "driver" not in cfg.packages:
            argv = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            out.command(argv)
            rc, stdout, stderr = ctx.run(argv)
            if rc != 0:
                out.fail(f"driver: cannot read the version: {describe_failure(argv, rc, stdout, stderr)}")
                return None
            return sorted({line.strip() for line in stdout.splitlines() if line.strip()}), "nvidia-smi"
        if component == "efa_installer":
            return self._efa(ctx, out)
        patterns = cfg.packages.get(component) or DEFAULT_PACKAGES.get(component)
        if not patterns:
            out.evidence(
                f"{component}: no package known to read its version from; set NODE.json packages.{component}"
            )
            if cfg.has_gpu:
                out.warn(f"{component}: pinned but not checkable (set packages.{component} in NODE.json)")
            return None
        versions = query_packages(ctx, out, patterns)
        if versions is None:
            return None
        if not versions and component == "slurm" and "slurm" not in cfg.packages:
            # No Slurm package: the slurm role's source build (slurm_install_method: source) is not a
            # package; its slurmd says its version itself.
            return self._slurmd_version(ctx, out)
        return [f"{name} {v}" for name, v in versions], "packages " + ", ".join(patterns)

    def _slurmd_version(self, ctx: Context, out: Outcome) -> Optional[Tuple[List[str], str]]:
        where = "no Slurm package; " + " ".join(SLURMD_VERSION)
        out.command(list(SLURMD_VERSION))
        rc, stdout, stderr = ctx.run(list(SLURMD_VERSION))
        if rc == RC_NOT_FOUND:
            return [], where + ": not found"
        version = parse_slurmd_version(stdout)
        if rc != 0 or version is None:
            out.fail(
                "slurm: cannot read the version: "
                + describe_failure(list(SLURMD_VERSION), rc, stdout, stderr)
            )
            return None
        return [f"slurmd {version}"], where

    def _efa(self, ctx: Context, out: Outcome) -> Optional[Tuple[List[str], str]]:
        argv = ["cat", EFA_INSTALLED]
        out.command(argv)
        rc, stdout, _ = ctx.run(argv)
        if rc != 0:
            return [], EFA_INSTALLED + " missing"
        m = _EFA_RE.search(stdout)
        if not m:
            out.fail(f"efa_installer: {EFA_INSTALLED} has no '# EFA installer version:' line")
            return None
        return [m.group(1)], EFA_INSTALLED


def query_packages(ctx: Context, out: Outcome, patterns: Sequence[str]) -> Optional[List[Tuple[str, str]]]:
    """Installed (name, version) pairs matching the globs, via dpkg-query, else rpm."""
    argv = ["dpkg-query", "-W", "-f", _DPKG_FORMAT, *patterns]
    out.command(argv)
    rc, stdout, stderr = ctx.run(argv)
    if rc == RC_NOT_FOUND:
        return _rpm(ctx, out, patterns)
    # dpkg-query exits 1 when some pattern matches nothing; the rest is still printed.
    if rc not in (0, 1):
        out.fail(describe_failure(argv, rc, stdout, stderr))
        return None
    found = []
    for line in stdout.splitlines():
        parts = line.split("\t")
        # Status-Abbrev: wanted action, then the package's state: "ii" installed, "hi" installed
        # and held (every package the roles pin), "rc" removed with its config left, "un" unknown.
        if len(parts) == 3 and parts[2][1:2] == "i" and parts[1]:
            found.append((parts[0], parts[1]))
    return found


def _rpm(ctx: Context, out: Outcome, patterns: Sequence[str]) -> Optional[List[Tuple[str, str]]]:
    argv = ["rpm", "-qa", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\n", *patterns]
    out.command(argv)
    rc, stdout, stderr = ctx.run(argv)
    if rc != 0:
        out.fail("cannot list packages: dpkg-query not found; " + describe_failure(argv, rc, stdout, stderr))
        return None
    return [
        (name, version)
        for name, version in (line.split("\t", 1) for line in stdout.splitlines() if "\t" in line)
    ]


# torch/version.py, written at build time: `cuda: Optional[str] = '12.6'` (None in a CPU build).
_TORCH_CUDA = re.compile(r"""^cuda\s*(?::[^=]*)?=\s*(?:['"]([^'"]+)['"]|None)""", re.MULTILINE)


def torch_cuda() -> Tuple[bool, Optional[str]]:
    """(found, CUDA release) of the installed torch, read from its version.py without importing it
    (an import costs seconds and, on a driver too old for the build, only fails later)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        try:
            with open(f"{folder}/version.py", encoding="utf-8") as fh:
                match = _TORCH_CUDA.search(fh.read())
        except OSError:
            continue
        if match:
            return True, match.group(1)
    return False, None


class PythonRuntime(Check):
    id = "python-runtime"
    group = "preflight"
    profiles = ("quick", "standard", "full")
    needs = ()
    measures = (
        "the Python running the suite is >= 3.9; where NODE.json pins torch, torch is installed at that version "
        "(with its CUDA build's label, 2.13.0+cu126, when the pin has one); on a GPU node torch's CUDA build "
        "(torch/version.py) is one the driver runs (its CUDA major <= nvidia-smi's CUDA Version)"
    )

    def run(self, ctx: Context) -> CheckResult:
        out = Outcome(self.id)
        version = sys.version.split()[0]
        out.metric("python_version", float("%d.%d" % sys.version_info[:2]), "version")
        out.evidence(f"python {version} at {ctx.python}")
        out.command("sys.version_info; importlib.metadata.version('torch'); torch/version.py cuda")
        if sys.version_info < (3, 9):
            out.fail(f"Python {version} is older than 3.9, the oldest this suite supports")
        # Read torch's installed version without importing it (an import costs seconds).
        import importlib.metadata  # here, not at the top: it costs every `validators list` ~50 ms

        try:
            torch_version: Optional[str] = importlib.metadata.version("torch")
        except importlib.metadata.PackageNotFoundError:
            torch_version = None
        pinned = ctx.config.software.get("torch")
        if torch_version is None:
            msg = f"torch is not installed for {ctx.python}; the burn-in, gloo and checkpoint checks need it"
            # Only a pin makes it this check's failure; the checks that need torch fail on their own.
            if pinned:
                out.fail(msg)
            else:
                out.warn(msg)
            return out.finish(f"Python {version}")
        out.evidence(f"torch {torch_version}")
        if pinned and not torch_matches(pinned, torch_version):
            out.fail(f"torch: expected {pinned}, found {torch_version}")
        if ctx.config.has_gpu:
            self._cuda(ctx, out, torch_version)
        return out.finish(f"Python {version}, torch {torch_version}")

    def _cuda(self, ctx: Context, out: Outcome, torch_version: str) -> None:
        """torch's CUDA build against the driver's: a build for a newer CUDA major imports fine and
        then finds no usable GPU, so every torch check would fail without saying why."""
        from validators.checks.base import NVIDIA_SMI_XML
        from validators.parsers import PARSERS

        found, cuda = torch_cuda()
        if not found:
            out.warn("torch's CUDA build not read (no torch/version.py with a cuda line)")
            return
        out.evidence(f"torch {torch_version} is built for CUDA {cuda or 'none (a CPU build)'}")
        if cuda is None:
            out.fail(
                f"torch {torch_version} is a CPU build: the GPU checks cannot use the GPUs (install a CUDA build)"
            )
            return
        rc, stdout, _ = ctx.run_cached(NVIDIA_SMI_XML)
        driver_cuda = PARSERS["nvidia-smi"](stdout).get("cuda_version") if rc == 0 else None
        if not driver_cuda:
            return  # gpu-inventory reports why nvidia-smi cannot say
        driver = PARSERS["nvidia-smi"](stdout).get("driver_version") or "?"
        out.evidence(f"driver {driver} supports CUDA {driver_cuda} (nvidia-smi)")
        if _major(cuda) > _major(driver_cuda):
            out.fail(
                f"torch {torch_version} is built for CUDA {cuda}; driver {driver} supports CUDA {driver_cuda}: torch "
                f"cannot use the GPUs (install a CUDA {_major(driver_cuda)}.x build, e.g. torch==<version>+cu126 from "
                "https://download.pytorch.org/whl/cu126, as clusterforge renders it from compatibility.yaml)"
            )


def _major(version: str) -> int:
    head = version.split(".")[0]
    return int(head) if head.isdigit() else 0


def torch_matches(pinned: str, found: str) -> bool:
    """A pin with a local label (2.13.0+cu126) must match exactly: another build of the same version
    (PyPI's 2.13.0 is CUDA 13.0) is the problem it exists to catch; without one, as version_matches."""
    if "+" in pinned:
        return found == pinned
    return version_matches(pinned, found)
