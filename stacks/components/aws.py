"""The pulumi_aws services the components use, each imported by itself.

pulumi_aws's package ``__init__`` names all of its ~240 services for type checkers; mypy reading
them took about 90 s of a fresh mypy run's 150 s. pyproject's [tool.mypy] skips that ``__init__``, and the
components reach the services through this module instead, so each service is still type-checked.
"""

from pulumi_aws import ec2, fsx, iam, s3, ssm, vpc

__all__ = ["ec2", "fsx", "iam", "s3", "ssm", "vpc"]
