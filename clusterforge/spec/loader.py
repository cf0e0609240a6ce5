"""Load a spec file into ``ClusterSpec``, keeping the line of every key for error messages."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_origin

import yaml
from pydantic import ValidationError

from clusterforge import strict_yaml
from clusterforge.spec.models import ClusterSpec

REPO_ROOT = Path(__file__).resolve().parents[2]
STACKS_DIR = REPO_ROOT / "stacks"


@dataclass(frozen=True)
class Finding:
    """One problem with a spec: where, what, and how bad."""

    level: str  # "error" | "warning" | "info"
    check_id: str
    path: str
    message: str
    file: str = ""
    line: int | None = None

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        path = f" {self.path}:" if self.path else ""
        tag = "" if self.level == "error" else f"{self.level}: "
        return f"{where}:{path} {tag}{self.message} [{self.check_id}]"


class SpecError(Exception):
    """The spec cannot be loaded; ``findings`` holds every problem found."""

    def __init__(self, findings: list[Finding]):
        self.findings = findings
        super().__init__("\n".join(f.render() for f in findings))


@dataclass
class LineMap:
    """Key path (``node_pools[0].instance_type``) to 1-based line number."""

    lines: dict[str, int] = field(default_factory=dict)

    def line(self, path: str) -> int | None:
        # Fall back to the nearest parent that has a line (a missing key is reported on its parent).
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return self.lines.get("", 1)


def _index_lines(node: yaml.Node, path: str, out: dict[str, int]) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = f"{path}.{key.value}" if path else str(key.value)
            out[child] = key.start_mark.line + 1
            _index_lines(value, child, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index_lines(item, f"{path}[{i}]", out)


def loc_to_path(loc: tuple[Any, ...]) -> str:
    """pydantic's error location to the dotted/indexed key path users see in the file."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("aws", "local", "static") and out == "provider":
            continue  # discriminated-union tag, not a key in the file
        else:
            out += f".{part}" if out else str(part)
    return out


def did_you_mean(value: str, choices: list[str] | tuple[str, ...]) -> str:
    match = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _schema_findings(exc: ValidationError, data: Any, file: str, lines: LineMap) -> list[Finding]:
    findings = []
    for err in exc.errors():
        path = loc_to_path(err["loc"])
        kind = err["type"]
        if kind == "extra_forbidden":
            key = str(err["loc"][-1])
            parent = _known_fields(err["loc"][:-1], data)
            hint = did_you_mean(key, parent)
            valid = f"; valid keys: {', '.join(sorted(parent))}" if parent else ""
            msg = f"unknown key {key!r}{hint}{valid}"
            check = "schema-unknown-key"
        elif kind == "missing":
            msg = "required key is missing"
            check = "schema-missing-key"
        else:
            value = err.get("input")
            msg = f"{err['msg']} (got {value!r})" if not isinstance(value, dict | list) else err["msg"]
            if kind == "string_type" and isinstance(value, int | float) and not isinstance(value, bool):
                msg += f'; YAML read it as a number: quote it, e.g. "{value}"'
            check = "schema-invalid-value"
        findings.append(Finding("error", check, path, msg, file, lines.line(path)))
    return findings


def _known_fields(loc: tuple[Any, ...], data: Any) -> list[str]:
    """Field names of the model at ``loc`` (for did-you-mean on unknown keys)."""
    from clusterforge.spec import models as m

    union_tags = {"aws": m.AwsProvider, "local": m.LocalProvider, "static": m.StaticProvider}
    model: Any = ClusterSpec
    previous: Any = None
    key_next = False
    for part in loc:
        if isinstance(part, int) or key_next:
            key_next = False
            continue  # list index or a user's dict key (a profile name): same item model
        if previous == "provider" and part in union_tags:
            model = union_tags[part]  # pydantic names the union member it tried
        else:
            field_info = getattr(model, "model_fields", {}).get(part)
            model = _inner_model(field_info.annotation) if field_info else None
            key_next = field_info is not None and get_origin(field_info.annotation) is dict
        previous = part
    return list(getattr(model, "model_fields", {})) if model else []


def _inner_model(annotation: Any) -> Any:
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        inner = _inner_model(arg)
        if inner is not None:
            return inner
    return None


def read_yaml(path: Path) -> tuple[Any, LineMap]:
    """Parse YAML and index the line of every key. Syntax errors and duplicate keys become a SpecError."""
    file = _display(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(
            [Finding("error", "spec-file", "", f"cannot read spec: {exc.strerror}", file)]
        ) from None
    try:
        node = strict_yaml.compose(text, file)
        data = strict_yaml.construct(node)
    except strict_yaml.DuplicateKeyError as exc:
        raise SpecError(
            [
                Finding("error", "yaml-duplicate-key", d.path, d.message(), file, d.line)
                for d in exc.duplicates
            ]
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(
            [Finding("error", "yaml-syntax", "", f"YAML syntax: {problem}", file, line)]
        ) from None
    lines: dict[str, int] = {}
    if node is not None:
        _index_lines(node, "", lines)
    if not isinstance(data, dict):
        raise SpecError([Finding("error", "spec-file", "", "a spec must be a YAML mapping", file, 1)])
    return data, LineMap(lines)


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def parse_spec(data: Any, file: str, lines: LineMap) -> ClusterSpec:
    """Schema phase: every schema error at once, or a valid ClusterSpec."""
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_schema_findings(exc, data, file, lines)) from None


def stack_path(stack: str) -> Path:
    path = STACKS_DIR / f"{stack}.yaml"
    if not path.exists():
        known = sorted(p.stem for p in STACKS_DIR.glob("*.yaml") if not p.stem.startswith("Pulumi"))
        hint = did_you_mean(stack, known)
        raise SpecError(
            [
                Finding(
                    "error",
                    "spec-file",
                    "",
                    f"no stack {stack!r}{hint}; known stacks: {', '.join(known)}",
                    _display(path),
                )
            ]
        )
    return path


def load_spec(path: Path) -> tuple[ClusterSpec, LineMap]:
    """Read and schema-check a spec file. Semantic checks: ``clusterforge.spec.checks``."""
    data, lines = read_yaml(path)
    return parse_spec(data, _display(path), lines), lines
