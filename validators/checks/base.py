"""What every check is, and the context it runs in."""

from __future__ import annotations

import os
import sys
from typing import Dict, Optional, Sequence, Tuple

from validators.config import NodeConfig
from validators.result import CheckResult, Outcome
from validators.runner import Runner, RunResult, describe_failure

NVIDIA_SMI_XML = ("nvidia-smi", "-q", "-x")


class Context:
    """What a check may use: the config, the profile, the injected runner.

    ``run_cached`` memoises read-only queries (``nvidia-smi -q -x``) within one suite run so
    nine preflight checks do not ask the driver nine times.
    """

    def __init__(self, config: NodeConfig, profile: str, runner: Runner) -> None:
        self.config = config
        self.profile = profile
        self.runner = runner
        self.python = sys.executable or "python3"
        self._cache: Dict[Tuple[str, ...], RunResult] = {}

    @property
    def timeout(self) -> float:
        return self.config.duration("command_timeout_seconds")

    def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> RunResult:
        return self.runner(list(argv), timeout if timeout is not None else self.timeout)

    def run_cached(self, argv: Sequence[str]) -> RunResult:
        key = tuple(argv)
        if key not in self._cache:
            self._cache[key] = self.run(argv)
        return self._cache[key]

    def nvidia_smi(self, out: Outcome) -> Optional[dict]:
        """Parsed ``nvidia-smi -q -x``, or None after recording nvidia-smi's own failure."""
        from validators.parsers import PARSERS

        out.command(NVIDIA_SMI_XML)
        rc, stdout, stderr = self.run_cached(NVIDIA_SMI_XML)
        if rc != 0:
            out.fail(describe_failure(NVIDIA_SMI_XML, rc, stdout, stderr))
            out.evidence(*(stdout + stderr).splitlines()[:10])
            return None
        parsed = PARSERS["nvidia-smi"](stdout)
        if parsed.get("error") and not parsed.get("gpus"):
            out.fail(f"nvidia-smi: {parsed['error']}")
            return None
        return parsed

    def workload(self, name: str) -> str:
        """Path of a workload script (run as a subprocess with this same Python)."""
        return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workloads", name)


class Check:
    """One check. Subclasses set the class attributes and implement ``run``.

    ``applies`` returns None when the check applies to this node, else the reason it does not
    (the result is then ``skip``); a check whose ``needs`` name "gpu" is skipped on a node
    without one, and a subclass adding conditions starts from ``super().applies``. ``run`` must
    not pass when it could not measure: a missing tool or a tool that fails is a ``fail`` with
    the tool's own message.
    """

    id: str = ""
    group: str = ""
    profiles: Tuple[str, ...] = ()
    needs: Tuple[str, ...] = ()
    measures: str = ""

    def applies(self, config: NodeConfig) -> Optional[str]:
        return needs_gpu(config) if "gpu" in self.needs else None

    def run(self, ctx: Context) -> CheckResult:
        raise NotImplementedError


def needs_gpu(config: NodeConfig) -> Optional[str]:
    if not config.has_gpu:
        return f"not applicable: NODE.json says this node has no GPU (gpu.count = 0, {config.instance_type})"
    return None
