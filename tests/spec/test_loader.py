"""Schema phase: a spec that does not fit the models stops at once, every schema error listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterforge.spec.loader import SpecError, load_spec, loc_to_path, stack_path
from clusterforge.spec.models import ClusterSpec

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, edits: list[tuple[str, str]], append: str = "", stack: str = "prod") -> Path:
    text = (ROOT / "stacks" / f"{stack}.yaml").read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "spec.yaml"
    path.write_text(text + append)
    return path


def errors_of(path: Path) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return [f.render() for f in info.value.findings]


def line_containing(path: Path, text: str) -> int:
    return next(
        n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line and "#" not in line[:2]
    )


def test_example_stacks_load() -> None:
    for stack in ("local", "dev", "prod"):
        spec, lines = load_spec(ROOT / "stacks" / f"{stack}.yaml")
        assert isinstance(spec, ClusterSpec) and spec.stack == stack
        assert lines.line("node_pools[0].instance_type") is not None


def test_unknown_key_named_with_line_and_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, [("    count: 16\n", "    count: 16\n    placment_group: {strategy: cluster}\n")])
    (out,) = errors_of(path)
    line = line_containing(path, "placment_group")
    assert out.startswith(f"{path}:{line}: node_pools[1].placment_group: unknown key 'placment_group'")
    assert "(did you mean 'placement_group'?)" in out
    assert "valid keys: capacity_block_id" in out
    assert out.endswith("[schema-unknown-key]")


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path, [], append="orchestraton: {}\n")
    outs = errors_of(path)
    assert any("orchestraton: unknown key 'orchestraton' (did you mean 'orchestration'?)" in o for o in outs)


def test_unknown_key_inside_provider_union(tmp_path: Path) -> None:
    path = write(tmp_path, [("  egress: nat\n", "  egres: nat\n")])
    (out,) = errors_of(path)
    assert f":{line_containing(path, 'egres:')}: provider.egres: unknown key 'egres'" in out
    assert "did you mean 'egress'?" in out


def test_missing_required_key(tmp_path: Path) -> None:
    path = write(tmp_path, [("  slurm: 25.11.2\n", "")])
    (out,) = errors_of(path)
    assert f"{path}:{line_containing(path, 'software:')}: software.slurm: required key is missing" in out


def test_all_schema_errors_at_once(tmp_path: Path) -> None:
    path = write(tmp_path, [("    count: 16\n", "    count: -1\n"), ("  egress: nat\n", "  egress: natgw\n")])
    outs = errors_of(path)
    assert len(outs) == 2
    assert any("node_pools[1].count: Input should be greater than or equal to 0 (got -1)" in o for o in outs)
    assert any("provider.egress: Input should be 'nat' or 'endpoints' (got 'natgw')" in o for o in outs)


def test_unquoted_number_gets_a_quoting_hint(tmp_path: Path) -> None:
    path = write(tmp_path, [("  cuda: 12.8.1\n", "  cuda: 12.8\n")])
    (out,) = errors_of(path)
    assert "software.cuda: Input should be a valid string (got 12.8)" in out
    assert 'quote it, e.g. "12.8"' in out


def test_bad_version_pattern(tmp_path: Path) -> None:
    path = write(tmp_path, [("  nccl: 2.26.2\n", "  nccl: 2.26.2-1+cuda12.8\n")])
    (out,) = errors_of(path)
    assert "software.nccl: String should match pattern" in out and "'2.26.2-1+cuda12.8'" in out


def test_unknown_provider_kind(tmp_path: Path) -> None:
    path = write(tmp_path, [("  kind: aws\n", "  kind: gcp\n")])
    (out,) = errors_of(path)
    assert "provider" in out and "'gcp'" in out


def test_bad_cidr(tmp_path: Path) -> None:
    path = write(tmp_path, [("  vpc_cidr: 10.0.0.0/16\n", "  vpc_cidr: 10.0.0.0/33\n")])
    (out,) = errors_of(path)
    assert f":{line_containing(path, 'vpc_cidr')}: network.vpc_cidr:" in out and "10.0.0.0/33" in out


def test_yaml_syntax_error_has_a_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("stack: x\nprovider: {kind: local\nnode_pools: []\n")
    (out,) = errors_of(path)
    assert out.startswith(f"{path}:") and "YAML syntax" in out and out.endswith("[yaml-syntax]")


def test_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    (out,) = errors_of(path)
    assert "a spec must be a YAML mapping" in out


def test_unknown_stack_suggests_the_nearest() -> None:
    with pytest.raises(SpecError) as info:
        stack_path("prdo")
    assert "no stack 'prdo' (did you mean 'prod'?); known stacks: dev, local, prod" in str(info.value)


def test_loc_to_path_drops_union_tags() -> None:
    assert loc_to_path(("provider", "aws", "region")) == "provider.region"
    assert loc_to_path(("node_pools", 2, "count")) == "node_pools[2].count"


def test_unknown_key_inside_a_named_profile(tmp_path: Path) -> None:
    path = write(tmp_path, [("      suite: standard\n", "      suite: standard\n      thresholdz: {}\n")])
    (out,) = errors_of(path)
    assert "certification.profiles.production.thresholdz: unknown key 'thresholdz'" in out
    assert "(did you mean 'thresholds'?)" in out


def test_a_key_twice_in_a_pool_is_an_error_naming_the_second(tmp_path: Path) -> None:
    # PyYAML keeps the last `count:` silently; the spec must say which line to remove.
    path = write(tmp_path, [("    count: 16\n", "    count: 16\n    count: 4\n")])
    (out,) = errors_of(path)
    first = line_containing(path, "count: 16")
    line = line_containing(path, "count: 4")
    assert out.startswith(
        f"{path}:{line}: node_pools[1].count: duplicate key 'count' (first at line {first})"
    )
    assert "remove one of them" in out and out.endswith("[yaml-duplicate-key]")


def test_two_software_blocks_are_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, [], append="software:\n  os_image: ubuntu-22.04\n")
    (out,) = errors_of(path)
    first = line_containing(path, "software:")
    last = len(path.read_text().splitlines()) - 1
    assert out.startswith(f"{path}:{last}: software: duplicate key 'software' (first at line {first})")


def test_every_duplicate_is_listed_and_merge_keys_may_override(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(
        "stack: x\nstack: y\n"
        "base: &b {count: 1, role: gpu}\n"
        "pool: {<<: *b, count: 2}\n"  # overriding a merged key is what a merge is for
        "other: {a: 1, a: 2}\n"
    )
    outs = errors_of(path)
    assert [o.split(": duplicate")[0] for o in outs] == [f"{path}:2: stack", f"{path}:5: other.a"]


def test_the_state_backend_is_one_place_every_runner_reaches(tmp_path: Path) -> None:
    spec, _ = load_spec(ROOT / "stacks" / "prod.yaml")
    assert spec.state.backend.startswith("s3://") and spec.state.lease_s == 300
    local, _ = load_spec(ROOT / "stacks" / "local.yaml")
    assert local.state.backend == "local"  # the default: today's .clusterforge/<stack>/
    for bad, says in [
        ("relative/path", "give local, s3://BUCKET/PREFIX, or an absolute path every runner mounts"),
        ("s3://Bad_Bucket/x", "an S3 backend is s3://BUCKET/PREFIX with a valid bucket name"),
    ]:
        path = write(tmp_path, [("  backend: s3://example-clusterforge-state/prod\n", f"  backend: {bad}\n")])
        (out,) = errors_of(path)
        assert f":{line_containing(path, 'backend:')}: state.backend:" in out and says in out, out
    path = write(tmp_path, [("  backend: s3://example-clusterforge-state/prod\n", "  backnd: /shared/x\n")])
    assert any("state.backnd: unknown key 'backnd' (did you mean 'backend'?)" in o for o in errors_of(path))
