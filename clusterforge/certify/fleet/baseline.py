"""Stored fleet baselines: figures of nodes that passed, per stack and instance type.

One file per type, ``.clusterforge/<stack>/baselines/<instance-type>.json`` (state root as the
journal's: ``$CLUSTERFORGE_STATE_DIR`` or ``<repo>/.clusterforge``), written atomically. It is the
reference when a run has too few nodes of a type for its own median, and the check on a run where
every node is slow. Each sample keeps the run, node, time and the software versions it ran (the
NODE.json ``software`` pins) and, for container nodes, the share of the machine the node had
(``share``, e.g. "0.375 CPU, 2048 MiB": clusterforge/providers/local/share.py). A baseline recorded
with other versions than the spec's is not used unless the profile says so; one recorded with
another share is never a reference (a node with half the CPU is half as fast, not slow), and the
verdict says which happened. Only nodes that passed with no fleet warning enter; each metric keeps
its last ``KEEP`` samples; the reference is their median.

File (``schema_version`` 1)::

    {"schema": "clusterforge-baseline", "schema_version": 1, "instance_type": "local",
     "stack": "local", "updated": "2026-…Z",
     "metrics": {"matmul-burnin.rate": {"unit": "GFLOP/s", "higher_is_better": true,
                 "samples": [{"value": 46.5, "node": "node-001", "run": "20260101T…",
                              "time": "2026-…Z", "versions": {"slurm": "22.05.8"},
                              "share": "0.375 CPU, 2048 MiB"}]}}}
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from clusterforge.journal import now_iso, state_root, write_atomic

SCHEMA = "clusterforge-baseline"
SCHEMA_VERSION = 1
KEEP = 50  # samples per metric: enough for a steady median, small enough to follow a fleet's drift
_TYPE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file and what to do."""


@dataclass(frozen=True)
class Sample:
    value: float
    node: str
    run: str
    time: str
    versions: dict[str, str] = field(default_factory=dict)
    share: str = ""  # container nodes: the share of the machine it was measured with ("" elsewhere)


@dataclass
class MetricHistory:
    unit: str
    higher_is_better: bool
    samples: list[Sample] = field(default_factory=list)


@dataclass(frozen=True)
class BaselineReference:
    """What a baseline says about one metric for the current software versions."""

    value: float  # median of the samples used (or, when not applied, of all samples)
    unit: str
    samples: int
    nodes: int
    applies: bool  # False: only samples of another share, or of other versions the profile does not allow
    other_versions: str = ""  # "slurm 23.02.1 in the baseline, 22.05.8 now" when versions differ
    other_share: str = ""  # "measured with 0.5 CPU, 2048 MiB; these nodes have 0.375 CPU, 2048 MiB"


def _version_diff(recorded: Mapping[str, str], current: Mapping[str, str]) -> str:
    parts = []
    for key in sorted(set(recorded) | set(current)):
        if recorded.get(key) != current.get(key):
            parts.append(
                f"{key} {recorded.get(key) or 'absent'} in the baseline, {current.get(key) or 'absent'} now"
            )
    return "; ".join(parts[:2]) + (f" (+{len(parts) - 2} more)" if len(parts) > 2 else "")


@dataclass
class Baseline:
    instance_type: str
    stack: str = ""
    updated: str = ""
    metrics: dict[str, MetricHistory] = field(default_factory=dict)
    path: Path | None = None  # where it was read from, for messages

    def add(self, metric: str, unit: str, higher_is_better: bool, sample: Sample, keep: int = KEEP) -> None:
        history = self.metrics.setdefault(metric, MetricHistory(unit, higher_is_better))
        history.samples.append(sample)
        del history.samples[: max(0, len(history.samples) - keep)]

    def reference(
        self,
        metric: str,
        versions: Mapping[str, str] | None,
        *,
        across_versions: bool = False,
        share: str | None = None,
    ) -> BaselineReference | None:
        """The metric's reference for these versions and this share; None when the baseline has no
        sample of it.

        ``share`` None skips the share check; else only samples of the same share count, and with
        none the reference never applies (``other_share`` says what it was measured with).
        ``versions`` None skips the version check. Samples of the same versions are used when there
        are any; else all samples, marked ``other_versions``, and ``applies`` only when
        ``across_versions``."""
        history = self.metrics.get(metric)
        if history is None or not history.samples:
            return None
        pool = history.samples if share is None else [s for s in history.samples if s.share == share]
        if not pool:
            measured = Counter(s.share for s in history.samples).most_common(1)[0][0]
            return BaselineReference(
                value=statistics.median(s.value for s in history.samples),
                unit=history.unit,
                samples=len(history.samples),
                nodes=len({s.node for s in history.samples}),
                applies=False,
                other_share=f"measured with {measured or 'no fixed share'}; these nodes have {share or 'none'}",
            )
        same = pool if versions is None else [s for s in pool if s.versions == dict(versions)]
        used, diff = same, ""
        if not same:
            used = pool
            recorded = Counter(json.dumps(s.versions, sort_keys=True) for s in used).most_common(1)[0][0]
            diff = _version_diff(json.loads(recorded), versions or {})
        return BaselineReference(
            value=statistics.median(s.value for s in used),
            unit=history.unit,
            samples=len(used),
            nodes=len({s.node for s in used}),
            applies=bool(same) or across_versions,
            other_versions=diff,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "instance_type": self.instance_type,
            "stack": self.stack,
            "updated": self.updated,
            "metrics": {
                name: {
                    "unit": h.unit,
                    "higher_is_better": h.higher_is_better,
                    "samples": [asdict(s) for s in h.samples],
                }
                for name, h in sorted(self.metrics.items())
            },
        }


def _bad(where: str, what: str) -> BaselineError:
    return BaselineError(
        f"{where}: not a usable baseline ({what}); move it away or re-import a good export "
        f"(`invoke baseline.import`)"
    )


def _sample(raw: Any, where: str) -> Sample:
    if not isinstance(raw, Mapping):
        raise _bad(where, "a sample is not an object")
    value = raw.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(where, f"sample value {value!r} is not a finite number")
    versions = raw.get("versions", {})
    if not isinstance(versions, Mapping) or not all(isinstance(v, str) for v in versions.values()):
        raise _bad(where, "sample versions must map component -> version string")
    text = {k: raw.get(k, "") for k in ("node", "run", "time", "share")}
    if not all(isinstance(v, str) for v in text.values()):
        raise _bad(where, "sample node/run/time/share must be strings")
    return Sample(float(value), text["node"], text["run"], text["time"], dict(versions), text["share"])


def parse_baseline(data: Any, where: str, instance_type: str | None = None) -> Baseline:
    """Validate a baseline document; ``instance_type`` refuses a file of another type."""
    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, Mapping) else type(data).__name__
        raise _bad(where, f"schema {found!r}, expected {SCHEMA!r}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise _bad(
            where, f"schema_version {data.get('schema_version')!r}, this clusterforge reads {SCHEMA_VERSION}"
        )
    kind = data.get("instance_type")
    if not isinstance(kind, str) or not _TYPE_NAME.match(kind):
        raise _bad(where, f"instance_type {kind!r} is not a type name")
    if instance_type is not None and kind != instance_type:
        raise _bad(where, f"it is the baseline of instance type {kind!r}, not {instance_type!r}")
    metrics = data.get("metrics")
    if not isinstance(metrics, Mapping):
        raise _bad(where, "'metrics' is not an object")
    baseline = Baseline(kind, str(data.get("stack") or ""), str(data.get("updated") or ""))
    for name, body in metrics.items():
        if not isinstance(body, Mapping) or not isinstance(body.get("samples"), list):
            raise _bad(where, f"metric {name!r} has no sample list")
        unit, higher = body.get("unit"), body.get("higher_is_better")
        if not isinstance(unit, str) or not isinstance(higher, bool):
            raise _bad(where, f"metric {name!r} needs a unit string and higher_is_better true/false")
        baseline.metrics[str(name)] = MetricHistory(
            unit, higher, [_sample(s, where) for s in body["samples"]]
        )
    return baseline


def read_baseline(path: Path, instance_type: str | None = None) -> Baseline:
    """Read and validate one baseline file; every problem is a ``BaselineError`` naming the file."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read the baseline ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _bad(str(path), f"not JSON: {exc}") from None
    baseline = parse_baseline(data, str(path), instance_type)
    baseline.path = path
    return baseline


class BaselineStore:
    """The baselines of one stack: ``<state root>/<stack>/baselines/<instance-type>.json``."""

    def __init__(self, stack: str, root: Path | None = None) -> None:
        self.stack = stack
        self.dir = (root or state_root()) / stack / "baselines"

    def path(self, instance_type: str) -> Path:
        if not _TYPE_NAME.match(instance_type):
            raise BaselineError(f"{instance_type!r} is not an instance type name (letters, digits, . _ -)")
        return self.dir / f"{instance_type}.json"

    def types(self) -> list[str]:
        return sorted(p.stem for p in self.dir.glob("*.json")) if self.dir.is_dir() else []

    def load(self, instance_type: str) -> Baseline | None:
        """The type's baseline; None when none was recorded; ``BaselineError`` when it is unusable."""
        path = self.path(instance_type)
        if not path.exists():
            return None
        return read_baseline(path, instance_type)

    def save(self, baseline: Baseline) -> Path:
        path = self.path(baseline.instance_type)
        baseline.stack = baseline.stack or self.stack
        baseline.updated = now_iso()
        write_atomic(path, json.dumps(baseline.to_json(), indent=2) + "\n")
        baseline.path = path
        return path
