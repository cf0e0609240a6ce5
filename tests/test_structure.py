"""The library's structure, read from its source (ast, nothing imported): no import circle in
clusterforge/, TYPE_CHECKING imports included, and no `_private` name imported from another
package (a folder's private names are its own)."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBRARY = "clusterforge"
# Other code that imports the library: its imports of private names are checked too.
CLIENTS = ("stacks", "validators", "plugins", "benchmarks", "tasks.py")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    line: int
    module: str  # the module imported, or the module a name is imported from
    name: str | None  # the name imported from ``module`` (None: ``import module``)


def module_name(path: Path, root: Path = REPO) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


@functools.cache
def _parsed(path: Path) -> ast.Module:  # both tests read the library: parse each file once
    return ast.parse(path.read_text(), str(path))


def imports(path: Path, root: Path = REPO) -> Iterator[Import]:
    """Every import statement in ``path``, wherever it sits (functions, ``if TYPE_CHECKING``)."""
    me = module_name(path, root)
    package = me if is_package(path) else me.rpartition(".")[0]
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(me, node.lineno, alias.name, None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importer's package, up level - 1 folders
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                yield Import(me, node.lineno, base, alias.name)


def sources(*tops: str, root: Path = REPO) -> list[Path]:
    out: list[Path] = []
    for top in tops:
        path = root / top
        out += (
            [path]
            if path.is_file()
            else sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
        )
    return out


def import_graph(root: Path = REPO, top: str = LIBRARY) -> dict[str, set[str]]:
    """module -> the library modules it imports (``from pkg import mod`` is an edge to pkg.mod)."""
    files = sources(top, root=root)
    known = {module_name(p, root) for p in files}
    graph: dict[str, set[str]] = {m: set() for m in known}
    for path in files:
        for imp in imports(path, root):
            target = (
                f"{imp.module}.{imp.name}" if imp.name and f"{imp.module}.{imp.name}" in known else imp.module
            )
            if target in known and target != imp.importer:
                graph[imp.importer].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # the library's graph is shallow: recursion is fine
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def private_imports(files: list[Path], root: Path = REPO) -> list[str]:
    """``from pkg.mod import _name`` or an ``_module`` from outside the folder that owns it."""

    def private(part: str) -> bool:
        return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))

    found = []
    for path in files:
        own_package = (
            module_name(path, root).rpartition(".")[0] if not is_package(path) else module_name(path, root)
        )
        for imp in imports(path, root):
            if imp.module.split(".")[0] != LIBRARY:
                continue
            parts = imp.module.split(".") + ([imp.name] if imp.name and imp.name != "*" else [])
            for depth, part in enumerate(parts):
                if private(part):
                    # Private to a folder: the package holding the `_module`, or the one holding
                    # the module that defines `_name`.
                    owner = ".".join(parts[:depth])
                    if not (root / owner.replace(".", "/")).is_dir():
                        owner = owner.rpartition(".")[0]
                    if owner != own_package:
                        where = path.relative_to(root)
                        found.append(f"{where}:{imp.line}: {'.'.join(parts)} (private to {owner})")
                    break
    return found


def test_the_library_has_no_import_circle() -> None:
    graph = import_graph()
    assert len(graph) > 100 and sum(map(len, graph.values())) > 200  # it read the library's imports
    assert circles(graph) == []


def test_no_private_name_is_imported_from_another_package() -> None:
    assert private_imports(sources(LIBRARY, *CLIENTS)) == []


def test_every_type_ignore_names_its_code_and_says_why() -> None:
    import tomllib

    checked = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    bare = []
    for path in sources(*checked):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "type: ignore" in line and not IGNORE_WITH_REASON.search(line):
                bare.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert bare == [], "say why after the ignore: `# type: ignore[code]  # why`"


IGNORE_WITH_REASON = re.compile(r"# type: ignore\[[a-z-]+(, *[a-z-]+)*\]  # \S")


def test_the_reason_rule_tells_a_bare_ignore_from_an_explained_one() -> None:
    assert IGNORE_WITH_REASON.search("x = f(y)  # type: ignore[arg-type]  # y is a fake")
    assert not IGNORE_WITH_REASON.search("x = f(y)  # type: ignore[arg-type]")
    assert not IGNORE_WITH_REASON.search("x = f(y)  # type: ignore")


# --- the checks themselves, on a small tree with the faults in it ---------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_circle_through_type_checking_and_a_function_body_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "clusterforge/__init__.py": "",
            "clusterforge/a/__init__.py": "",
            "clusterforge/a/one.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..b import two\n",
            "clusterforge/b/__init__.py": "",
            "clusterforge/b/two.py": "def f():\n    import clusterforge.a.one\n",
            "clusterforge/c.py": "from clusterforge.a import one\n",
        },
    )
    graph = import_graph(root)
    assert graph["clusterforge.c"] == {"clusterforge.a.one"}  # `from pkg import mod` names the module
    assert circles(graph) == [["clusterforge.a.one", "clusterforge.b.two"]]
    del graph["clusterforge.b.two"]
    graph["clusterforge.a.one"].clear()
    assert circles(graph) == []


@pytest.mark.parametrize(
    ("where", "line", "expected"),
    [
        ("clusterforge/b/use.py", "from clusterforge.a.mod import _helper\n", "clusterforge.a.mod._helper"),
        ("clusterforge/b/use.py", "from clusterforge.a._impl import thing\n", "clusterforge.a._impl.thing"),
        ("clusterforge/b/use.py", "from ..a import _impl\n", "clusterforge.a._impl"),
        (
            "clusterforge/a/sub/use.py",
            "from clusterforge.a.mod import _helper\n",
            "clusterforge.a.mod._helper",
        ),
        ("stacks/use.py", "import clusterforge.a._impl\n", "clusterforge.a._impl"),
        ("clusterforge/a/use.py", "from clusterforge.a.mod import _helper\n", None),  # its own folder
        ("clusterforge/a/use.py", "from ._impl import thing\n", None),
        ("clusterforge/b/use.py", "from clusterforge.a.mod import __version__, helper\n", None),
    ],
)
def test_a_private_name_from_another_folder_is_found(
    tmp_path: Path, where: str, line: str, expected: str | None
) -> None:
    library = {"clusterforge/__init__.py": "", "clusterforge/a/__init__.py": "", "clusterforge/a/mod.py": ""}
    root = _tree(tmp_path, {**library, "clusterforge/a/_impl.py": "", where: line})
    found = private_imports([root / where], root)
    assert found == ([f"{where}:1: {expected} (private to clusterforge.a)"] if expected else [])
