"""The Pulumi program: load the spec named by the stack, build the cluster, export its nodes.

Thin on purpose: all resources are made by the components in ``components/``.
"""

import pulumi
from components.cluster import aws_provider, build_cluster, export_cluster

from clusterforge.images.boot import boot_images
from clusterforge.spec.loader import load_spec, stack_path

spec, _ = load_spec(stack_path(pulumi.get_stack()))
provider = aws_provider(spec)  # a clear error for a stack of another provider
region = pulumi.Config("aws").get("region")
if region and region != provider.region:
    raise ValueError(
        f"Pulumi.{spec.stack}.yaml: aws:region is {region!r} but stacks/{spec.stack}.yaml says provider.region "
        f"{provider.region!r}; make them equal"
    )
# The AMI resolved on the first run, recorded by clusterforge.providers.aws.automation; pools with
# image: baked boot the AMI `invoke image.bake` recorded (.clusterforge/<stack>/images.json).
# Data-holding resources this run may replace: set by the driver only for `invoke up --allow-replace`.
config = pulumi.Config("clusterforge")
allowed = frozenset(config.get_object("allow-replace") or [])
cluster = build_cluster(
    spec, recorded_ami=config.get("ami"), allow_replace=allowed, pool_images=boot_images(spec)
)
for key, value in export_cluster(spec, cluster).items():
    pulumi.export(key, value)
