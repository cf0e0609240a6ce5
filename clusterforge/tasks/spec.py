"""spec.*: check a cluster spec, write its JSON Schema, list the checks."""

from __future__ import annotations

import json
from pathlib import Path

from invoke import Context, task
from invoke.exceptions import Exit

from clusterforge.catalog import load_hardware
from clusterforge.spec.checks import CHECKS, Report, check_file, check_ids
from clusterforge.spec.checks.annotate import annotation
from clusterforge.spec.checks.base import suggest
from clusterforge.spec.loader import stack_path
from clusterforge.spec.schema import SCHEMA_PATH, render_schema, write_schema
from clusterforge.tasks._cli import friendly

FORMATS = ("text", "json", "github")


def _spec_path(stack: str, file: str) -> Path:
    if bool(stack) == bool(file):
        raise Exit("give exactly one of --stack NAME or --file PATH", code=2)
    return Path(file) if file else stack_path(stack)


def _summary(report: Report) -> str:
    spec = report.spec
    if spec is None:
        return f"{report.file}: not loaded"
    nodes = sum(p.count for p in spec.node_pools)
    gpus = 0
    hw = load_hardware()
    for pool in spec.node_pools:
        it = hw.get(pool.instance_type)
        gpus += pool.count * (it.gpu_count if it else 0)
    where: str = spec.provider.kind
    if spec.provider.kind == "aws":
        where += f" {spec.provider.region}"
    return (
        f"{report.file}: ok: stack {spec.stack!r} on {where}, {len(spec.node_pools)} pools, {nodes} nodes, "
        f"{gpus} GPUs; {len(report.warnings)} warning(s)"
    )


@task(
    iterable=["suppress"],
    help={
        "stack": "stack name: checks stacks/NAME.yaml",
        "file": "path of a spec file (instead of --stack)",
        "suppress": "check id to silence (repeatable); `invoke spec.checks` lists the ids",
        "json": "print the findings as JSON (for CI) instead of text (same as --format json)",
        "format": "text (default), json, or github: workflow commands (::error file=...,line=...::) "
        "that GitHub Actions shows as annotations on the spec's lines",
    },
)
@friendly
def check(
    c: Context,
    stack: str = "",
    file: str = "",
    suppress: list[str] | None = None,
    json: bool = False,
    format: str = "text",  # noqa: A002 - the option is --format
) -> None:
    """Check a cluster spec: schema, then every rule against both catalogues.

    Exit 0 with a one-line summary when the spec is valid (warnings are printed but do not fail);
    exit 1 listing every error as FILE:LINE: key.path: message [check-id].
    """
    suppress = list(suppress or [])
    known = check_ids()
    for cid in suppress:
        if cid not in known:
            raise Exit(
                f"--suppress {cid!r}: no such check{suggest(cid, known)}; `invoke spec.checks` lists them", 2
            )
    fmt = "json" if json else format
    if fmt not in FORMATS:
        raise Exit(f"--format {format!r}: use one of {', '.join(FORMATS)}", 2)
    report = check_file(_spec_path(stack, file), suppress)
    if fmt == "github":
        for finding in report.findings:
            print(annotation(finding))
        if not report.ok:
            n, w = len(report.errors), len(report.warnings)
            raise Exit(f"{report.file}: {n} error(s), {w} warning(s): the spec is not valid", code=1)
        print(_summary(report))
        return
    if fmt == "json":
        print(_json_dumps(report.to_json()))
        if not report.ok:
            raise Exit(code=1)
        return
    for finding in report.errors:
        print(finding.render())
    rest = [f for f in report.findings if f.level != "error"]
    if rest:
        print("warnings:" if report.errors else "", end="\n" if report.errors else "")
        for finding in rest:
            print(finding.render())
    if report.suppressed:
        print(f"suppressed: {', '.join(report.suppressed)}")
    if not report.ok:
        n, w = len(report.errors), len(report.warnings)
        raise Exit(f"{report.file}: {n} error(s), {w} warning(s): the spec is not valid", code=1)
    print(_summary(report))


def _json_dumps(data: object) -> str:
    return json.dumps(data, indent=2)


@task(help={"check": "do not write: exit 1 if the committed schema is out of date"})
@friendly
def schema(c: Context, check: bool = False) -> None:
    """Write schemas/cluster-spec.schema.json, the spec's JSON Schema.

    Editors use it to complete and check stacks/*.yaml through their
    `# yaml-language-server: $schema=...` first line. A test fails when the committed file is stale."""
    rel = SCHEMA_PATH.relative_to(Path(__file__).resolve().parents[2])
    if check:
        if not SCHEMA_PATH.exists() or SCHEMA_PATH.read_text() != render_schema():
            raise Exit(f"{rel} is out of date: run `invoke spec.schema` and commit it", code=1)
        print(f"{rel}: up to date")
        return
    changed = write_schema()
    print(f"{rel}: {'written' if changed else 'unchanged'}")


@task(name="checks")
def list_checks(c: Context) -> None:
    """List the spec checks in run order, by the ids --suppress and suppress_checks take."""
    width = max(len(k.id) for k in CHECKS)
    for k in CHECKS:
        print(f"{k.id:<{width}}  {k.summary}")
