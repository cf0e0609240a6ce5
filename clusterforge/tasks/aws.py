"""AWS stack tasks: preflight and preview (thin: parse, call clusterforge.providers.aws, print).

`up` and `down` for AWS stacks are the pipeline's tasks; they reach the same Pulumi program
through ``clusterforge.providers.aws``.
"""

from __future__ import annotations

from invoke import Context, task
from invoke.exceptions import Exit

from clusterforge.spec.models import AwsProvider, ClusterSpec
from clusterforge.tasks._cli import friendly

_HELP_STACK = "stack name: stacks/NAME.yaml and its Pulumi stack NAME"


def _aws_spec(stack: str) -> ClusterSpec:
    from clusterforge.tasks.cluster import load

    if not stack:
        raise Exit("give --stack NAME (an AWS stack in stacks/NAME.yaml)", code=2)
    spec = load(stack, "")
    if not isinstance(spec.provider, AwsProvider):
        raise Exit(
            f"stacks/{stack}.yaml: provider.kind is {spec.provider.kind!r}; preview is for 'aws' stacks",
            code=2,
        )
    return spec


def _preflight(spec: ClusterSpec) -> None:
    from clusterforge.providers.aws.preflight import CredentialsError, make_clients, run_preflight

    assert isinstance(spec.provider, AwsProvider)
    try:
        findings = run_preflight(spec, make_clients(spec.provider.region))
    except CredentialsError as exc:
        raise Exit(f"error: {exc}", code=1) from None
    for finding in findings:
        print(finding.render())
    errors = [f for f in findings if f.level == "error"]
    if errors:
        raise Exit(
            f"preflight: {len(errors)} error(s); fix them (or suppress by id in suppress_checks)", code=1
        )


@task(help={"stack": _HELP_STACK})
@friendly
def preflight(c: Context, stack: str = "") -> None:
    """Check an AWS stack before any change: offerings in the AZ, catalogue vs AWS facts, vCPU
    quotas, capacity reservations and Capacity Blocks, placement groups. Read-only."""
    _preflight(_aws_spec(stack))


@task(help={"stack": _HELP_STACK, "skip_preflight": "do not run the boto3 preflight first"})
@friendly
def preview(c: Context, stack: str = "", skip_preflight: bool = False) -> None:
    """Preview an AWS stack: resources to create/update/replace/delete, and which nodes that touches.

    Needs the Pulumi CLI (with the aws plugin) and AWS credentials; changes nothing."""
    from clusterforge.providers.aws.automation import BackendNotReady, PulumiCliMissing, StackDriver

    spec = _aws_spec(stack)
    if not skip_preflight:
        _preflight(spec)
    try:
        summary = StackDriver(spec.stack).preview()
    except (PulumiCliMissing, BackendNotReady) as exc:
        raise Exit(f"error: {exc}", code=2) from None
    print(summary.render())
