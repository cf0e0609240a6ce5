"""Role variables that only an AWS node needs, rendered into the stack's inventory.

- Time: chrony against the Amazon Time Sync Service on the link-local address every EC2 instance
  reaches without egress ("Set the time for your Linux instance", EC2 user guide: "server
  169.254.169.123 prefer iburst minpoll 4 maxpoll 4"; the IPv6 endpoint only on Nitro, and "We
  don't recommend using both"). Ubuntu's NTP pools need UDP/123 out, which the node egress group
  does not allow, so without this a node's clock drifts and munge (TTL 300 s) refuses it.
- EFA installer: AWS signs every tarball; the role checks the signature against AWS's key,
  whose fingerprint is pinned here ("Get started with EFA and NCCL", step "Verify the EFA
  tarball": "4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC ... If the fingerprint does not
  match, don't run the EFA installation script"), and the spec's SHA-256 when it gives one.
- Reboots over SSM: amazon.aws's aws_ssm connection never reconnects after a reboot
  (ansible-collections/amazon.aws issue 3044, open; the fix, pull 3056, unreleased in the bundled
  10.1.2): the driver role must not reboot inline there; the pipeline reboots the node through
  EC2 and waits for SSM (``clusterforge.providers.aws.readiness``).
"""

from __future__ import annotations

from typing import Any

from clusterforge.spec.models import AwsProvider, ClusterSpec

AMAZON_TIME_SYNC = "169.254.169.123"
EFA_INSTALLER_KEY_FINGERPRINT = "4E9091BCBB97A96B26B15E59A05480B1DD2D3CCC"


def time_sync_vars(spec: ClusterSpec) -> dict[str, Any]:
    """common's NTP servers on AWS; elsewhere the role's default (the distribution's pools)."""
    return {"common_ntp_servers": [AMAZON_TIME_SYNC]} if spec.provider.kind == "aws" else {}


def efa_vars(spec: ClusterSpec) -> dict[str, Any]:
    """How the efa role verifies the installer it downloads (only where one is in the spec)."""
    sw = spec.software
    if spec.provider.kind != "aws" or not sw.efa_installer:
        return {}
    out: dict[str, Any] = {"efa_installer_gpg_fingerprint": EFA_INSTALLER_KEY_FINGERPRINT}
    if sw.efa_installer_sha256:
        out["efa_installer_sha256"] = sw.efa_installer_sha256
    return out


def reboot_vars(spec: ClusterSpec) -> dict[str, Any]:
    """SSM stacks: the driver role says REBOOT NEEDED instead of rebooting; the pipeline reboots."""
    provider = spec.provider
    if isinstance(provider, AwsProvider) and provider.connection == "ssm":
        return {"nvidia_driver_skip_reboot": True}
    return {}
