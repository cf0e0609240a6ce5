"""What every AWS preflight check shares: findings, the boto3 clients, the check base class,
and how a credentials problem is told apart from any other AWS error."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError

from clusterforge.providers.base import Problem
from clusterforge.spec.models import AwsProvider, ClusterSpec, NodePool

Level = Literal["error", "warning", "info"]

CREDENTIAL_ERRORS = {
    "ExpiredToken": "expired",
    "ExpiredTokenException": "expired",
    "RequestExpired": "expired",
    "InvalidClientTokenId": "not valid",
    "UnrecognizedClientException": "not valid",
    "SignatureDoesNotMatch": "not valid",
    "AuthFailure": "not valid",
}


@dataclass(frozen=True)
class Finding:
    id: str  # the check id; suppress with spec.suppress_checks
    level: Level
    subject: str  # what it is about, as a spec key path: "node_pools[gpu]"
    message: str
    fix: str = ""

    def render(self) -> str:
        fix = f"\n    fix: {self.fix}" if self.fix else ""
        return f"{self.level}: {self.subject}: {self.message} [{self.id}]{fix}"

    def to_problem(self) -> Problem:
        level: Literal["error", "warning"] = "error" if self.level == "error" else "warning"
        fix = f" Fix: {self.fix}" if self.fix else ""
        return Problem(level, self.id, f"{self.subject}: {self.message}.{fix}")


@dataclass(frozen=True)
class AwsClients:
    ec2: Any
    quotas: Any  # service-quotas
    sts: Any


def make_clients(region: str, endpoint_url: str | None = None, session: Any = None) -> AwsClients:
    """boto3 clients for ``region``; ``endpoint_url`` points them at a local AWS API (tests)."""
    import boto3

    session = session or boto3.session.Session()
    kw = {"region_name": region, "endpoint_url": endpoint_url}
    return AwsClients(
        ec2=session.client("ec2", **kw),
        quotas=session.client("service-quotas", **kw),
        sts=session.client("sts", **kw),
    )


class CredentialsError(Exception):
    """AWS credentials are missing, expired or invalid; the message is one line to show."""


def credential_problem(exc: BaseException) -> str | None:
    """One line saying what is wrong with the credentials, if that is what ``exc`` is."""
    fix = "run `aws sso login` or `aws configure` (or set AWS_PROFILE) and try again"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return f"no AWS credentials found: {fix}"
    name = type(exc).__name__
    if name in ("TokenRetrievalError", "SSOTokenLoadError", "UnauthorizedSSOTokenError"):
        return f"the AWS SSO session has expired: {fix}"
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code in CREDENTIAL_ERRORS:
            return f"the AWS credentials are {CREDENTIAL_ERRORS[code]} ({code}): {fix}"
    return None


def live_pools(spec: ClusterSpec) -> list[NodePool]:
    return [p for p in spec.node_pools if p.count > 0]


def aws_provider(spec: ClusterSpec) -> AwsProvider:
    if not isinstance(spec.provider, AwsProvider):
        raise ValueError(f"provider.kind is {spec.provider.kind!r}, not 'aws'")
    return spec.provider


def error_code(exc: ClientError) -> str:
    return exc.response.get("Error", {}).get("Code", "")


class Check:
    id = ""

    def run(self, spec: ClusterSpec, aws: AwsClients, now: dt.datetime) -> list[Finding]:
        raise NotImplementedError
