"""baseline.show / baseline.export / baseline.import: the stored fleet baselines of a stack.

Thin: the store is ``clusterforge.certify.fleet.baseline`` (``.clusterforge/<stack>/baselines/``)."""

from __future__ import annotations

import json as jsonlib
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from invoke import Context, task
from invoke.exceptions import Exit

from clusterforge.catalog import load_hardware
from clusterforge.certify.fleet.baseline import Baseline, BaselineError, BaselineStore, read_baseline
from clusterforge.spec.checks.base import suggest
from clusterforge.tasks._cli import friendly, locked, state_read

_HELP_STACK = "stack name: its baselines live in .clusterforge/NAME/baselines/"
_HELP_TYPE = "instance type, e.g. local or p5.48xlarge"


def _summary(b: Baseline) -> dict[str, Any]:
    metrics = {}
    for name, h in sorted(b.metrics.items()):
        versions = sorted({jsonlib.dumps(s.versions, sort_keys=True) for s in h.samples})
        metrics[name] = {
            "unit": h.unit,
            "higher_is_better": h.higher_is_better,
            "reference": statistics.median(s.value for s in h.samples) if h.samples else None,
            "samples": len(h.samples),
            "nodes": len({s.node for s in h.samples}),
            "runs": sorted({s.run for s in h.samples}),
            "versions": [jsonlib.loads(v) for v in versions],
            # container nodes: the share of the machine the samples were measured with ("" elsewhere)
            "shares": sorted({s.share for s in h.samples}),
        }
    return {"instance_type": b.instance_type, "path": str(b.path), "updated": b.updated, "metrics": metrics}


def _versions(items: list[dict[str, str]]) -> str:
    return " | ".join(", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none recorded" for d in items)


@task(help={"stack": _HELP_STACK, "type": f"{_HELP_TYPE} (default: every type stored)", "json": "print JSON"})
@friendly
def show(c: Context, stack: str, type: str = "", json: bool = False) -> None:  # noqa: A002 - the option is --type
    """Show a stack's baselines: per metric the reference (median), samples, nodes, runs, versions and
    (container nodes) the share of the machine they were measured with.

    Exit 1 when a baseline file is unusable (it is named, with what is wrong)."""
    with _state(stack):
        _show(stack, type, json)


@contextmanager
def _state(stack: str) -> Iterator[None]:
    """The stack's state where its spec keeps it (a shared backend is read into a private copy)."""
    from clusterforge.state.config import spec_for_stack

    spec = spec_for_stack(stack)
    if spec is None:
        yield
        return
    with state_read(spec):
        yield


def _show(stack: str, type: str, json: bool) -> None:  # noqa: A002
    store = BaselineStore(stack)
    kinds = [type] if type else store.types()
    shown, bad = [], []
    for kind in kinds:
        try:
            b = store.load(kind)
        except BaselineError as exc:
            bad.append(str(exc))
            continue
        if b is None:
            raise Exit(
                f"no baseline for {kind!r} in {store.dir} (stored: {', '.join(store.types()) or 'none'})", 1
            )
        shown.append(_summary(b))
    if json:
        print(jsonlib.dumps({"stack": stack, "baselines": shown, "errors": bad}, indent=2))
    else:
        if not kinds:
            print(f"{stack}: no baselines yet in {store.dir} (certified runs record them)")
        for s in shown:
            print(f"{s['instance_type']}: {s['path']} (updated {s['updated'] or 'unknown'})")
            for name, m in s["metrics"].items():
                print(
                    f"  {name:<36} {m['reference']:>10.4g} {m['unit']:<8} median of {m['samples']} sample(s), "
                    f"{m['nodes']} node(s), {len(m['runs'])} run(s); versions {_versions(m['versions'])}"
                    + (f"; share {' | '.join(x or 'none' for x in m['shares'])}" if any(m["shares"]) else "")
                )
    if bad:
        raise Exit("\n".join(bad), 1)


@task(help={"stack": _HELP_STACK, "type": _HELP_TYPE, "out": "file to write (default: print to stdout)"})
@friendly
def export(c: Context, stack: str, type: str, out: str = "") -> None:  # noqa: A002
    """Export one instance type's baseline (to seed another stack of that type with baseline.import)."""
    with _state(stack):
        store = BaselineStore(stack)
        try:
            b = store.load(type)
        except BaselineError as exc:
            raise Exit(str(exc), 1) from None
        if b is None:
            raise Exit(
                f"no baseline for {type!r} in {store.dir} (stored: {', '.join(store.types()) or 'none'})", 1
            )
    text = jsonlib.dumps(b.to_json(), indent=2) + "\n"
    if not out:
        print(text, end="")
        return
    Path(out).write_text(text)
    print(f"{out}: baseline of {type} from stack {stack} ({len(b.metrics)} metric(s))")


def _stack_types(stack: str) -> list[str] | None:
    """Instance types of the stack's compute pools, or None when the stack has no spec file here."""
    from clusterforge.spec.loader import STACKS_DIR, load_spec

    path = STACKS_DIR / f"{stack}.yaml"
    if not path.exists():
        return None
    spec, _ = load_spec(path)  # an invalid spec stops here with its findings
    return sorted({p.instance_type for p in spec.node_pools if p.role == "gpu"})


@task(
    name="import",
    help={
        "stack": _HELP_STACK,
        "file": "a file written by baseline.export",
        "type": f"{_HELP_TYPE}: refuse the file unless it is this type's baseline",
        "replace": "replace the stack's existing baseline of that type",
    },
)
@friendly
def import_(c: Context, stack: str, file: str, type: str = "", replace: bool = False) -> None:  # noqa: A002
    """Import a baseline exported from another stack: validated, and only for an instance type this
    stack's compute pools use (any catalogue type when the stack has no spec here). Refuses to
    overwrite an existing baseline unless --replace."""
    try:
        b = read_baseline(Path(file), type or None)
    except BaselineError as exc:
        raise Exit(str(exc), 1) from None
    hw = load_hardware()
    if b.instance_type not in hw:
        raise Exit(
            f"{file}: instance type {b.instance_type!r} is not in the hardware catalogue{suggest(b.instance_type, hw.names())}",
            1,
        )
    types = _stack_types(stack)
    if types is not None and b.instance_type not in types:
        raise Exit(
            f"{file}: a baseline of {b.instance_type!r}, but stack {stack!r} has compute pools of "
            f"{', '.join(types) or 'no type'} only: a baseline seeds a stack of the same instance type",
            1,
        )
    with locked(stack, "baseline.import"):  # it changes the stack's state: lock, read, write back
        _import(stack, b, file, replace)


def _import(stack: str, b: Baseline, file: str, replace: bool) -> None:
    store = BaselineStore(stack)
    try:
        existing = store.load(b.instance_type)
    except BaselineError:
        existing = None  # an unusable file is what an import is for; --replace still required
        if not replace:
            raise Exit(
                f"{store.path(b.instance_type)} is unusable; give --replace to overwrite it", 1
            ) from None
    if existing is not None and not replace:
        raise Exit(f"{store.path(b.instance_type)} exists; give --replace to overwrite it with {file}", 1)
    path = store.save(b)  # the file keeps the stack it was recorded in
    samples = sum(len(h.samples) for h in b.metrics.values())
    print(f"{path}: imported {len(b.metrics)} metric(s), {samples} sample(s) from {file}")
