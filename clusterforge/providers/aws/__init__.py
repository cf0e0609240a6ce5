"""The AWS provider: the Pulumi program in ``stacks/`` driven through the Automation API, with
boto3 preflight checks and an Ansible inventory rendered from the stack outputs.

Imports of boto3 and pulumi stay inside the submodules so that importing this package is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterforge.providers.aws.provider import AwsStackProvider
    from clusterforge.spec.models import ClusterSpec


def make_provider(spec: ClusterSpec) -> AwsStackProvider:
    from clusterforge.providers.aws.provider import AwsStackProvider

    return AwsStackProvider(spec)
