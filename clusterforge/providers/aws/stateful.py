"""What a Pulumi preview would do to the resources that hold data (the FSx file system, the
checkpoint bucket), from ``clusterforge/data/aws_stateful.yaml``: the provider's replace-on-change
arguments of each such type, with sources.

Two uses: ``from_steps`` reads a real preview's steps (op, type, name and the keys Pulumi says force
the replacement) and keeps the replaces and deletes of data-holding resources; ``predict`` applies
the catalogue to two sets of inputs (old and new program), which is how the tests stand in for the
engine. ``invoke plan`` shows each change, ``invoke up`` refuses one that is not named with
``--allow-replace`` (clusterforge.providers.aws.automation).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

CATALOGUE = Path(__file__).resolve().parents[2] / "data" / "aws_stateful.yaml"


@dataclass(frozen=True)
class StatefulType:
    type: str
    kind: str
    holds: str
    replace_on_change: tuple[str, ...]
    replace_on_decrease: tuple[str, ...]
    source: tuple[str, ...]


@dataclass(frozen=True)
class Catalogue:
    types: dict[str, StatefulType]
    transient_names: tuple[str, ...]
    sources: dict[str, str] = field(default_factory=dict)

    def holds_data(self, type_: str, name: str) -> bool:
        return type_ in self.types and not any(fnmatch.fnmatch(name, p) for p in self.transient_names)


@cache
def catalogue(path: Path = CATALOGUE) -> Catalogue:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    types = {
        t: StatefulType(
            type=t,
            kind=body["kind"],
            holds=body["holds"],
            replace_on_change=tuple(body["replace_on_change"]),
            replace_on_decrease=tuple(body.get("replace_on_decrease") or ()),
            source=tuple(body["source"]),
        )
        for t, body in doc["resources"].items()
    }
    for t in types.values():
        missing = [s for s in t.source if s not in doc["sources"]]
        if missing:
            raise ValueError(f"{path}: {t.type}: source id(s) {missing} not declared under 'sources'")
    return Catalogue(types, tuple(doc.get("transient_names") or ()), dict(doc["sources"]))


@dataclass(frozen=True)
class StatefulChange:
    """A replace or delete of a resource that holds data."""

    type: str
    name: str
    op: str  # replace | delete
    keys: tuple[str, ...] = ()  # the arguments that force the replacement

    @property
    def kind(self) -> str:
        entry = catalogue().types.get(self.type)
        return entry.kind if entry else self.type

    def render(self) -> str:
        entry = catalogue().types.get(self.type)
        holds = f" ({entry.holds})" if entry else ""
        why = f" because {', '.join(self.keys)} changed" if self.keys else ""
        verb = (
            "replaced: a new one is created and the old one, with its data, deleted"
            if self.op == "replace"
            else "deleted, with its data"
        )
        return f"{self.kind} {self.name}{holds} would be {verb}{why}; `invoke up` refuses unless given --allow-replace {self.name}"


def from_steps(steps: Iterable[tuple[str, str, str, Iterable[str]]]) -> list[StatefulChange]:
    """(op, type, name, keys) of a preview's steps -> the replaces/deletes of data-holding resources."""
    cat = catalogue()
    out: dict[tuple[str, str], StatefulChange] = {}
    for op, type_, name, keys in steps:
        if op not in ("replace", "delete") or not cat.holds_data(type_, name):
            continue
        key = (type_, name)
        if key not in out or (op == "replace" and out[key].op == "delete"):
            out[key] = StatefulChange(type_, name, op, tuple(sorted(set(keys))))
    return sorted(out.values(), key=lambda c: (c.type, c.name))


def _lower(old: Any, new: Any) -> bool:
    """new is a smaller number, or a lower dotted version ("2.12" after "2.15")."""
    try:
        return tuple(int(p) for p in str(new).split(".")) < tuple(int(p) for p in str(old).split("."))
    except ValueError:
        return False


def predict(type_: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """What the provider does when a resource's inputs go from ``old`` to ``new``: ("replace", keys),
    ("update", keys) or ("same", ())."""
    entry = catalogue().types.get(type_)
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    if not changed:
        return "same", ()
    if entry is None:
        return "update", tuple(changed)
    forced = [k for k in changed if k in entry.replace_on_change]
    forced += [k for k in changed if k in entry.replace_on_decrease and _lower(old.get(k), new.get(k))]
    return ("replace", tuple(sorted(forced))) if forced else ("update", tuple(changed))
