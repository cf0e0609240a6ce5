"""The OS images a spec can name, as AWS's public SSM parameters and their root devices.

Read by the Pulumi program (stacks/components/cluster.py) on a stack's first run only, and by the
Automation driver to record the image before that run starts (clusterforge.providers.aws.automation):
a first `up` cut short and retried later would otherwise follow the parameter to a newer image, and
one pool would boot two kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# SSM public parameters for the OS images the spec can name (amd64, current release).
AMI_PARAMETERS = {
    "ubuntu-22.04": "/aws/service/canonical/ubuntu/server/22.04/stable/current/amd64/hvm/ebs-gp2/ami-id",
    "ubuntu-24.04": "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
    "debian-12": "/aws/service/debian/release/bookworm/latest/amd64",
}
# Root device name of those images (Canonical's Ubuntu AMIs: /dev/sda1; Debian's: /dev/xvda).
ROOT_DEVICES = {"ubuntu-22.04": "/dev/sda1", "ubuntu-24.04": "/dev/sda1", "debian-12": "/dev/xvda"}


def current_ami(os_image: str, region: str, client: Callable[[str, str], Any] | None = None) -> str:
    """The image the SSM parameter names today (what a first run would boot)."""
    if client is None:
        import boto3

        def client(service: str, region: str) -> Any:
            return boto3.client(service, region_name=region)

    ssm = client("ssm", region)
    return str(ssm.get_parameter(Name=AMI_PARAMETERS[os_image])["Parameter"]["Value"])
