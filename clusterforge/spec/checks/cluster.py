"""Checks on the provider settings, network, shared storage and certification profiles."""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Network
from pathlib import Path

from clusterforge.catalog.compat import FsxDeployment
from clusterforge.spec.checks.base import Check, CheckContext, Issue, error, info, one_of, suggest, warning
from clusterforge.spec.loader import REPO_ROOT
from clusterforge.spec.models import AwsProvider, StaticProvider


class AwsProviderSettings(Check):
    id = "aws-provider"
    summary = "AZ in the region; SSH reachable as configured; endpoints egress only on a pre-baked image"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        prov = ctx.spec.provider
        if not isinstance(prov, AwsProvider):
            return
        zone_region = prov.availability_zone[:-1]
        if zone_region != prov.region or not prov.availability_zone[-1:].isalpha():
            yield error(
                "provider.availability_zone",
                f"availability zone {prov.availability_zone!r} is not in region {prov.region!r}; "
                f"use e.g. {prov.region}a",
            )
        if prov.connection == "ssh-bastion":
            if not prov.key_name:
                yield error(
                    "provider.key_name", "connection 'ssh-bastion' needs provider.key_name (an EC2 key pair)"
                )
            if not prov.admin_cidrs:
                yield error(
                    "provider.admin_cidrs",
                    "connection 'ssh-bastion' with no admin_cidrs: nobody could reach the bastion; add your CIDR "
                    "or use connection: ssm",
                )
        if prov.admin_cidrs and prov.connection == "ssm":
            yield warning(
                "provider.admin_cidrs",
                "admin_cidrs opens SSH on the head node, but with connection: ssm it has no public address "
                "and no bastion: nothing outside the VPC can reach it. Use connection: ssh-bastion, or drop "
                "admin_cidrs (Session Manager needs no SSH)",
            )
        if prov.ami_prebaked and not prov.ami:
            yield error(
                "provider.ami_prebaked",
                "ami_prebaked: true without provider.ami: name the pre-baked image (ami-...)",
            )
        if prov.egress == "endpoints" and not (prov.ami and prov.ami_prebaked):
            yield error(
                "provider.egress",
                "egress: endpoints leaves the nodes without internet, but the roles install from NVIDIA's CUDA "
                "repository, the Ubuntu archive, GitHub, the EFA installer and PyPI; use egress: nat, or set "
                "provider.ami to an image with the spec's software already installed and ami_prebaked: true",
            )
        for k, cidr in enumerate(prov.admin_cidrs):
            if cidr.prefixlen == 0:
                yield warning(
                    f"provider.admin_cidrs[{k}]",
                    f"{cidr} opens SSH to the whole internet; use your office CIDR or connection: ssm",
                )


class StaticInventory(Check):
    id = "static-inventory"
    summary = "A static provider's inventory file exists"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        prov = ctx.spec.provider
        if not isinstance(prov, StaticProvider):
            return
        path = Path(prov.inventory)
        if not path.is_absolute():
            path = REPO_ROOT / path
        if not path.is_file():
            yield error(
                "provider.inventory",
                f"inventory {prov.inventory!r} does not exist (paths are relative to the repository root, {REPO_ROOT})",
            )


class NetworkCidrs(Check):
    id = "network-cidrs"
    summary = "Subnets lie inside the VPC and do not overlap each other"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        if ctx.provider != "aws":
            return
        net = ctx.spec.network
        vpc = net.vpc_cidr
        subnets: list[tuple[str, IPv4Network]] = [
            (name, cidr) for name, cidr in net.subnets.model_dump().items() if cidr is not None
        ]
        for name, cidr in subnets:
            if not cidr.subnet_of(vpc):
                yield error(
                    f"network.subnets.{name}",
                    f"subnet {cidr} is outside the VPC {vpc}; pick a range inside {vpc}",
                )
        for a in range(len(subnets)):
            for b in range(a + 1, len(subnets)):
                (name_a, cidr_a), (name_b, cidr_b) = subnets[a], subnets[b]
                if cidr_a.overlaps(cidr_b):
                    yield error(
                        f"network.subnets.{name_b}",
                        f"subnet {name_b} {cidr_b} overlaps subnet {name_a} {cidr_a}; subnets must not overlap",
                    )
        gpu_nodes = sum(p.count for p in ctx.spec.node_pools if p.role == "gpu")
        usable = net.subnets.gpu.num_addresses - 5  # AWS reserves 5 addresses per subnet
        if gpu_nodes > usable:
            yield error(
                "network.subnets.gpu",
                f"subnet gpu {net.subnets.gpu} has {usable} usable addresses for {gpu_nodes} gpu nodes; widen it",
            )


_STORAGE_PROVIDERS = {
    "fsx_lustre": ("aws",),
    "checkpoint_bucket": ("aws",),
    "shared_volume": ("local",),
    "nfs": ("static", "aws"),
    "local_scratch": ("aws", "static"),
}


class StorageProvider(Check):
    id = "storage-provider"
    summary = "Shared storage kinds fit the provider (fsx/s3 on aws, shared_volume on local, nfs on static)"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        storage = ctx.spec.storage
        for key, providers in _STORAGE_PROVIDERS.items():
            if getattr(storage, key) is not None and ctx.provider not in providers:
                valid = [k for k, p in _STORAGE_PROVIDERS.items() if ctx.provider in p]
                yield error(
                    f"storage.{key}",
                    f"storage.{key} is not available on provider {ctx.provider!r}; {one_of(valid)}",
                )
        if storage.shared_path is None:
            yield warning(
                "storage",
                "no shared storage (fsx_lustre, shared_volume or nfs): checkpoint certification and multi-node "
                "jobs need a path every node sees",
            )


class FsxSettings(Check):
    id = "fsx-settings"
    summary = "FSx for Lustre capacity steps and per-unit throughput fit the deployment type"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        fsx = ctx.spec.storage.fsx_lustre
        if fsx is None:
            return
        rule = ctx.compat.fsx_lustre.deployment_types.get(fsx.deployment_type)
        if rule is None:
            return
        if not rule.capacity_ok(fsx.storage_capacity_gib):
            first = ", ".join(str(c) for c in rule.capacity_gib)
            yield error(
                "storage.fsx_lustre.storage_capacity_gib",
                f"{fsx.storage_capacity_gib} GiB is not a valid {fsx.deployment_type} size; valid: {first}, then "
                f"steps of {rule.capacity_step_gib} (e.g. {_nearest(fsx.storage_capacity_gib, rule)})",
            )
        tput = fsx.per_unit_storage_throughput
        if tput is not None and tput not in rule.throughput_per_tib:
            valid = ", ".join(str(t) for t in rule.throughput_per_tib) or "none (do not set it)"
            yield error(
                "storage.fsx_lustre.per_unit_storage_throughput",
                f"{tput} MB/s/TiB is not valid for {fsx.deployment_type}; valid: {valid}",
            )
        if tput is None and rule.throughput_per_tib:
            yield error(
                "storage.fsx_lustre",
                f"{fsx.deployment_type} needs per_unit_storage_throughput; "
                f"valid: {', '.join(str(t) for t in rule.throughput_per_tib)}",
            )


def _nearest(gib: int, rule: FsxDeployment) -> int:
    """The next valid size at or above ``gib``."""
    last, step = rule.capacity_gib[-1], rule.capacity_step_gib
    if gib <= last:
        return next(c for c in rule.capacity_gib if c >= gib)
    return last + -(-(gib - last) // step) * step


class CertificationProfiles(Check):
    id = "certification-profile"
    summary = "Every gpu pool names a defined certification profile"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        profiles = ctx.spec.certification.profiles
        used: set[str] = set()
        for i, pool in ctx.pools():
            name = pool.certification
            if name is None:
                if pool.role == "gpu":
                    hint = (
                        f"; defined: {', '.join(profiles)}"
                        if profiles
                        else "; define one under certification.profiles"
                    )
                    yield error(
                        f"node_pools[{i}]",
                        f"gpu pool {pool.name!r} has no certification profile: its nodes would never be admitted"
                        f"{hint}",
                    )
                continue
            used.add(name)
            if name not in profiles:
                yield error(
                    f"node_pools[{i}].certification",
                    f"unknown certification profile {name!r}{suggest(name, profiles)}; "
                    f"{one_of(profiles) if profiles else 'no profiles are defined under certification.profiles'}",
                )
        for name in profiles:
            if name not in used:
                yield info(f"certification.profiles.{name}", f"profile {name!r} is not used by any pool")


class ThresholdOverrides(Check):
    id = "threshold-overrides"
    summary = (
        "Threshold override keys exist for the pools' instance types; values are positive; fleet.* gaps "
        "are percents with warn under fail"
    )

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        from clusterforge.certify.fleet import rules as fleet_rules

        for name, profile in ctx.spec.certification.profiles.items():
            if not profile.thresholds:
                continue
            floors: dict[str, float] = {}
            keys: set[str] = set(fleet_rules.override_keys())
            types = []
            for _i, pool, it in ctx.typed_pools():
                if pool.certification == name:
                    floors.update(ctx.hardware.thresholds_for(it.name))
                    keys.update(ctx.hardware.threshold_keys(it.name))
                    types.append(it.name)
            fleet_bad = dict(fleet_rules.override_problems(profile.thresholds))
            for kind in sorted(set(types)):
                for key, message in fleet_rules.ordering_problems(ctx.hardware, kind, profile.thresholds):
                    fleet_bad.setdefault(key, message)
            for key, value in profile.thresholds.items():
                path = f"certification.profiles.{name}.thresholds.{key}"
                if key in fleet_bad and key in keys:
                    yield error(path, fleet_bad[key])
                elif types and key not in keys:
                    yield error(
                        path,
                        f"unknown threshold key {key!r} for {', '.join(sorted(set(types)))}"
                        f"{suggest(key, keys)}; {one_of(_listed(keys), limit=20)}",
                    )
                elif value <= 0:
                    yield error(path, f"threshold {key} must be > 0 (got {value})")
                elif key in floors and key.endswith(("_gbps", "_min")) and value < floors[key] / 2:
                    yield warning(
                        path,
                        f"override {value} is under half the catalogue floor {floors[key]}: a sick node would pass",
                    )


def _listed(keys: set[str]) -> list[str]:
    """Keys as a message lists them: floors by name, the many fleet.* keys as their pattern."""
    floors = sorted(k for k in keys if not k.startswith("fleet."))
    return [*floors, "fleet.[<metric>.]warn_gap_pct|fail_gap_pct|z_warn"]


def validator_check_ids() -> list[str] | None:
    """Ids of the node-side checks, from the validators registry; None if it cannot be read."""
    try:
        from validators import registry
    except Exception:  # noqa: BLE001 - any failure to load it only means "no registry to compare with"
        return None
    checks = getattr(registry, "CHECKS", None) or getattr(registry, "REGISTRY", None)
    if not checks:
        return None
    ids = [getattr(c, "id", None) for c in checks]
    return sorted(i for i in ids if isinstance(i, str))


class SkipChecks(Check):
    id = "skip-checks"
    summary = "skip_checks names validator checks that exist"

    def run(self, ctx: CheckContext) -> Iterable[Issue]:
        wanted = [
            (n, k, c) for n, p in ctx.spec.certification.profiles.items() for k, c in enumerate(p.skip_checks)
        ]
        if not wanted:
            return
        known = validator_check_ids()
        if known is None:
            yield info(
                "certification.profiles", "cannot verify skip_checks: the validators registry is unavailable"
            )
            return
        for name, k, check in wanted:
            if check not in known:
                yield error(
                    f"certification.profiles.{name}.skip_checks[{k}]",
                    f"unknown validator check {check!r}{suggest(check, known)}; "
                    "`python3 -m validators list` shows them all",
                )
