"""The one ordered list of spec checks, and the runner.

Order matters only for reading: structure first (types, pools), then software, then the rest.
A new check is added here explicitly, never registered by importing its module.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clusterforge.catalog import CompatMatrix, HardwareCatalog, load_compat, load_hardware
from clusterforge.spec.checks import cluster, health, pairings, pools, pytorch, software
from clusterforge.spec.checks.base import Check, CheckContext, suggest
from clusterforge.spec.loader import Finding, LineMap, SpecError, load_spec
from clusterforge.spec.models import ClusterSpec

CHECKS: tuple[type[Check], ...] = (
    pools.InstanceTypeKnown,
    pools.InstanceTypeProvider,
    pools.PoolNamesUnique,
    pools.HeadPool,
    pools.PoolRoleHardware,
    pools.GpuPoolPresent,
    pools.CapacityReservation,
    pools.EfaPlacementGroup,
    pools.RootVolumeIops,
    pools.PlacementGroupSettings,
    pools.Partitions,
    cluster.AwsProviderSettings,
    cluster.StaticInventory,
    cluster.NetworkCidrs,
    cluster.StorageProvider,
    cluster.FsxSettings,
    software.OsImageProvider,
    software.DriverBranch,
    software.DriverLifecycle,
    software.CudaDriver,
    software.GpuDriverCuda,
    pytorch.TorchDriver,
    software.KernelModule,
    software.FabricManager,
    software.NcclCuda,
    software.EfaSoftware,
    software.InstanceFloors,
    software.EfaEnv,
    software.SlurmFamily,
    pairings.DcgmCuda,
    pairings.SlurmNodeTopology,
    software.ContainerStack,
    health.SecurityFloor,
    health.HealthPolicy,
    cluster.CertificationProfiles,
    cluster.ThresholdOverrides,
    cluster.SkipChecks,
)

# Ids the runner itself reports under (not suppressible checks of their own).
CHECK_CRASHED = "check-crashed"
UNKNOWN_SUPPRESSION = "suppress-unknown"


def check_ids() -> list[str]:
    return [c.id for c in CHECKS]


def provider_check_ids() -> list[str]:
    """Ids of the provider preflight checks, which ``suppress_checks`` also silences."""
    # Imported here: the AWS preflight pulls in boto3, which spec checks otherwise never need.
    from clusterforge.providers.aws.preflight import CHECKS as AWS_PREFLIGHT

    return [c.id for c in AWS_PREFLIGHT]


@dataclass
class Report:
    """Every finding about one spec file, schema and semantic, plus what was silenced."""

    file: str
    findings: list[Finding] = field(default_factory=list)
    suppressed: list[str] = field(default_factory=list)
    spec: ClusterSpec | None = None

    def at(self, level: str) -> list[Finding]:
        return [f for f in self.findings if f.level == level]

    @property
    def errors(self) -> list[Finding]:
        return self.at("error")

    @property
    def warnings(self) -> list[Finding]:
        return self.at("warning")

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict:
        return {
            "file": self.file,
            "ok": self.ok,
            "stack": self.spec.stack if self.spec else None,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "suppressed": self.suppressed,
            "findings": [
                {
                    "level": f.level,
                    "check": f.check_id,
                    "file": f.file,
                    "line": f.line,
                    "path": f.path,
                    "message": f.message,
                    "text": f.render(),
                }
                for f in self.findings
            ],
        }


def run_checks(
    spec: ClusterSpec,
    lines: LineMap,
    file: str,
    suppress: Iterable[str] = (),
    hardware: HardwareCatalog | None = None,
    compat: CompatMatrix | None = None,
) -> tuple[list[Finding], list[str]]:
    """Semantic phase: every check, in registry order. Returns (findings, suppressed ids)."""
    ctx = CheckContext(spec, hardware or load_hardware(), compat or load_compat(), lines)
    known = check_ids()
    suppressible = known + provider_check_ids()
    findings: list[Finding] = []
    silenced = set(suppress)
    for k, cid in enumerate(spec.suppress_checks):
        silenced.add(cid)
        if cid not in suppressible:
            path = f"suppress_checks[{k}]"
            msg = f"unknown check id {cid!r}{suggest(cid, suppressible)}; `invoke spec.checks` lists them"
            findings.append(Finding("warning", UNKNOWN_SUPPRESSION, path, msg, file, lines.line(path)))
    for check_cls in CHECKS:
        if check_cls.id in silenced:
            continue
        try:
            issues = list(check_cls().run(ctx))
        except Exception as exc:  # noqa: BLE001 - a broken check must not hide the others' results
            detail = traceback.format_exc() if os.environ.get("CLUSTERFORGE_DEBUG") == "1" else ""
            msg = f"check {check_cls.id} failed: {type(exc).__name__}: {exc}{detail}"
            findings.append(Finding("error", CHECK_CRASHED, "", msg, file, None))
            continue
        for issue in issues:
            findings.append(
                Finding(issue.level, check_cls.id, issue.path, issue.message, file, lines.line(issue.path))
            )
    return findings, sorted(silenced & set(known))


def check_file(path: Path, suppress: Sequence[str] = ()) -> Report:
    """Both phases on one file: schema errors stop at once; otherwise every semantic finding."""
    try:
        spec, lines = load_spec(path)
    except SpecError as exc:
        first = exc.findings[0].file if exc.findings else str(path)
        return Report(file=first, findings=list(exc.findings))
    file = _display(path)
    findings, silenced = run_checks(spec, lines, file, suppress)
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: (order[f.level], f.line or 0))
    return Report(file=file, findings=findings, suppressed=silenced, spec=spec)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
