"""Read the YAML people edit strictly: a key given twice in one mapping is an error.

PyYAML's ``safe_load`` keeps the last of two equal keys without a word, so a second ``count:``
in a pool or a second ``software:`` block silently replaces the first. Every hand-edited file
clusterforge reads goes through here: stack specs (``stacks/*.yaml``, profiles included), static
inventories and their ``group_vars``, the hardware catalogue and the compatibility matrix.

Keys brought in by a YAML merge (``<<: *defaults``) may be overridden: that is what merging is for.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class DuplicateKey:
    """The second (or later) occurrence of a key in one mapping."""

    path: str  # key path of the occurrence, e.g. ``node_pools[0].count``
    key: str
    line: int  # 1-based line of this occurrence
    first_line: int  # 1-based line of the first occurrence

    def message(self) -> str:
        return (
            f"duplicate key {self.key!r} (first at line {self.first_line}); YAML would silently keep "
            "only the last one: remove one of them"
        )


class DuplicateKeyError(yaml.YAMLError):
    """A file has a key twice in one mapping. ``str()`` is one ``file:line: path: message`` per key."""

    def __init__(self, file: str, duplicates: list[DuplicateKey]):
        self.file = file
        self.duplicates = duplicates
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n".join(f"{self.file}:{d.line}: {d.path}: {d.message()}" for d in self.duplicates)


def _key_id(node: yaml.Node) -> tuple[str, str] | None:
    """What makes two keys equal (tag and text); None for a key that is not a scalar."""
    if isinstance(node, yaml.ScalarNode):
        return node.tag, node.value
    return None


def duplicate_keys(node: yaml.Node | None) -> list[DuplicateKey]:
    """Every repeated key under ``node`` (a composed document), in file order."""
    found: list[DuplicateKey] = []
    seen_nodes: set[int] = set()  # aliases share nodes; a recursive alias must not loop

    def walk(n: yaml.Node, path: str) -> None:
        if id(n) in seen_nodes:
            return
        seen_nodes.add(id(n))
        if isinstance(n, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key, value in n.value:
                if key.tag == MERGE_TAG:
                    walk(value, path)
                    continue
                child = f"{path}.{key.value}" if path else str(key.value)
                ident = _key_id(key)
                line = key.start_mark.line + 1
                if ident is not None:
                    if ident in first:
                        found.append(DuplicateKey(child, str(key.value), line, first[ident]))
                    else:
                        first[ident] = line
                walk(value, child)
        elif isinstance(n, yaml.SequenceNode):
            for i, item in enumerate(n.value):
                walk(item, f"{path}[{i}]")

    if node is not None:
        walk(node, "")
    return sorted(found, key=lambda d: d.line)


def compose(text: str, file: str) -> yaml.Node | None:
    """The document's node tree; raises ``DuplicateKeyError`` (or another ``yaml.YAMLError``)."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    duplicates = duplicate_keys(node)
    if duplicates:
        raise DuplicateKeyError(file, duplicates)
    return node


def construct(node: yaml.Node | None) -> Any:
    """The Python value of a composed document, as ``yaml.safe_load`` would build it."""
    if node is None:
        return None
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load(text: str, file: str) -> Any:
    """``yaml.safe_load`` that refuses duplicate keys; ``file`` names the source in the error."""
    return construct(compose(text, file))


def load_file(path: Path, file: str | None = None) -> Any:
    """Read and strictly load one YAML file; ``file`` (default: the path) names it in errors."""
    return load(path.read_text(encoding="utf-8"), str(path) if file is None else file)
