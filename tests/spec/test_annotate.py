"""spec.check --format github: findings as workflow commands on the spec's own lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from invoke import Context
from invoke.exceptions import Exit

from clusterforge.spec.checks.annotate import annotation, escape_data, escape_property
from clusterforge.spec.loader import REPO_ROOT, Finding
from clusterforge.tasks import spec as spec_tasks


def test_an_annotation_names_file_line_and_check() -> None:
    f = Finding(
        "error", "instance-type-known", "node_pools[1].instance_type", "unknown type", "stacks/x.yaml", 14
    )
    assert annotation(f) == (
        "::error file=stacks/x.yaml,line=14,title=instance-type-known::node_pools[1].instance_type: unknown type"
    )
    assert annotation(Finding("warning", "w", "", "m", "f.yaml", None)) == "::warning file=f.yaml,title=w::m"
    assert annotation(Finding("info", "i", "", "m")).startswith("::notice title=i::")


def test_escaping_follows_the_toolkit() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"
    f = Finding("error", "x", "k", "one\ntwo: 3, 4", "dir:odd,name.yaml", 2)
    assert annotation(f) == "::error file=dir%3Aodd%2Cname.yaml,line=2,title=x::k: one%0Atwo: 3, 4"


def _run(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, list[str]]:
    try:
        spec_tasks.check(Context(), file=str(path), format="github")
        code = 0
    except Exit as exc:
        code = int(exc.code)
    return code, capsys.readouterr().out.splitlines()


def test_a_bad_spec_gives_error_annotations_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        (REPO_ROOT / "stacks" / "local.yaml")
        .read_text()
        .replace("instance_type: local\n    count: 4", "instance_type: lcal\n    count: 4")
    )
    spec = tmp_path / "bad.yaml"
    spec.write_text(text)
    code, lines = _run(capsys, spec)
    line = text.splitlines().index("    instance_type: lcal") + 1
    assert code == 1
    errors = [x for x in lines if x.startswith("::error ")]
    assert errors == [e for e in errors if e.startswith(f"::error file={spec},line=")]
    assert any(f",line={line},title=instance-type-unknown::" in x and "'local'" in x for x in errors)


def test_a_schema_error_is_an_annotation_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text((REPO_ROOT / "stacks" / "local.yaml").read_text().replace("stack: local", "stak: local"))
    code, lines = _run(capsys, spec)
    assert code == 1 and any(x.startswith("::error ") and "schema-unknown-key" in x for x in lines)


def test_a_good_spec_exits_0_with_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _run(capsys, REPO_ROOT / "stacks" / "prod.yaml")
    assert code == 0 and "ok: stack 'prod'" in lines[-1]
    assert all(x.startswith(("::warning ", "::notice ")) for x in lines[:-1])


def test_an_unknown_format_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(Exit, match="--format 'sarif'"):
        spec_tasks.check(Context(), stack="local", format="sarif")
