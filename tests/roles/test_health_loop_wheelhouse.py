"""The health loop's install on the controller (roles/slurm/tasks/health_loop_install.yml): the wheelhouse
built on the control machine (roles/slurm/files/build_wheelhouse.py) holds what the loop imports, at the
control machine's versions; it installs into a fresh venv with no index and the loop runs from it; the
same files give the same bytes, and a changed package a new version."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from clusterforge.health.loop.render import package_hash

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles" / "slurm" / "files" / "build_wheelhouse.py"
DISTRIBUTIONS = yaml.safe_load((REPO / "roles" / "slurm" / "defaults" / "main.yml").read_text())[
    "slurm_health_loop_distributions"
]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_wheelhouse", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _build(package: Path, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(package), str(out), *DISTRIBUTIONS],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_wheel_names_escape_the_name_and_compress_the_tags() -> None:
    bw = _script()
    assert bw.escape("typing-extensions") == "typing_extensions" and bw.escape("a.b--c") == "a_b_c"
    tags = bw.tags_of(
        "Wheel-Version: 1.0\nTag: cp311-cp311-manylinux_2_17_x86_64\nTag: cp311-cp311-manylinux2014_x86_64\n"
    )
    assert bw.compressed(tags) == "cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64"


def test_a_distribution_that_is_not_installed_is_named_with_the_fix(tmp_path: Path) -> None:
    bw = _script()
    with pytest.raises(bw.BuildError, match="no-such-dist is not installed beside .*install the project's"):
        bw.repack("no-such-dist")
    with pytest.raises(bw.BuildError, match="is not the clusterforge package .*set slurm_health_loop_source"):
        bw.build(str(tmp_path), str(tmp_path / "out"), ["pydantic"])


def test_a_repacked_wheel_holds_the_installed_files_and_a_record_of_them() -> None:
    bw = _script()
    filename, data, version, tags = bw.repack("PyYAML")
    assert version == importlib.metadata.version("PyYAML") and filename.startswith(f"PyYAML-{version}-")
    wheel = zipfile.ZipFile(io.BytesIO(data))
    names = wheel.namelist()
    assert "yaml/__init__.py" in names and not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.endswith(("/INSTALLER", "/REQUESTED", "/direct_url.json"))]
    record = wheel.read(f"PyYAML-{version}.dist-info/RECORD").decode().splitlines()
    assert len(record) == len(names)  # every file, and RECORD itself (no hash)
    installed = importlib.metadata.distribution("PyYAML").locate_file("yaml/__init__.py")
    assert wheel.read("yaml/__init__.py") == Path(str(installed)).read_bytes()


@pytest.mark.slow  # starts a second Python
def test_the_distributions_are_what_the_loop_imports() -> None:
    probe = (
        "import sys, importlib.metadata as md; before = set(sys.modules)\n"
        "import clusterforge.health.loop.__main__, clusterforge.health.loop.round\n"
        "tops = {n.split('.')[0] for n in set(sys.modules) - before}\n"
        "dists = md.packages_distributions()\n"
        "import json; print(json.dumps(sorted({d for t in tops if t not in sys.stdlib_module_names and t != 'clusterforge' "
        "for d in dists.get(t, [])})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    imported = {_normal(d) for d in json.loads(done.stdout)}
    assert imported == {_normal(d) for d in DISTRIBUTIONS}


@pytest.mark.slow  # builds, creates a venv and runs pip and the loop in it
def test_the_wheelhouse_installs_with_no_index_and_the_loop_runs_from_it(tmp_path: Path) -> None:
    package = tmp_path / "src" / "clusterforge"
    shutil.copytree(REPO / "clusterforge", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "src" / "pyproject.toml")
    out = tmp_path / "wheelhouse"
    first = _build(package, out)
    assert first["changed"] and first["python_tags"] == [f"cp{sys.version_info[0]}{sys.version_info[1]}"]
    # the hash the inventory renders for the controller is the wheel's version label
    assert first["version"].endswith("+" + package_hash(package))
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    again = _build(package, out)  # the same files: the same bytes, nothing changed
    assert not again["changed"] and {p.name: p.read_bytes() for p in out.iterdir()} == before

    (package / "health" / "loop" / "__init__.py").write_text('"""changed"""\n')
    changed = _build(package, out)
    assert changed["changed"] and changed["version"] != first["version"]
    assert sorted(p.name for p in out.iterdir()) == changed["files"]  # the old clusterforge wheel is gone

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    install = [
        *pip,
        "install",
        "-q",
        "--no-index",
        "--find-links",
        str(out),
        "-r",
        str(out / "requirements.txt"),
    ]
    subprocess.run(install, check=True, capture_output=True)
    freeze = subprocess.run([*pip, "freeze"], check=True, capture_output=True, text=True).stdout
    assert f"clusterforge=={changed['version']}" in freeze
    for dist in DISTRIBUTIONS:  # the control machine's own versions
        assert f"=={importlib.metadata.version(dist)}" in freeze, (dist, freeze)
    subprocess.run([*pip, "check"], check=True, capture_output=True)
    # A round as the timer runs it, from the venv alone (-I: not this checkout), with the configuration
    # the role writes: no scontrol on this machine, so the controller is away and the round pauses.
    config = tmp_path / "health-loop.json"
    config.write_text(json.dumps({**_loop_config(tmp_path), "state_dir": str(tmp_path / "shared")}))
    loop = [str(venv / "bin" / "python"), "-I", "-m", "clusterforge.health.loop", "--config", str(config)]
    ran = subprocess.run(
        loop, capture_output=True, text=True, cwd=tmp_path, check=False, env={"PATH": "/usr/bin:/bin"}
    )
    assert ran.returncode == 0 and "paused" in ran.stdout, ran.stdout + ran.stderr
    state = subprocess.run([*loop, "--state"], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert "replace_requested" in json.loads(state.stdout)


def _loop_config(tmp_path: Path) -> dict:
    """The loop's configuration as the inventory gives it to the slurm role (a local spec with health)."""
    from clusterforge.catalog import load_hardware
    from clusterforge.inventory import slurm_vars
    from clusterforge.providers.base import Node
    from clusterforge.spec.loader import load_spec

    path = tmp_path / "local.yaml"
    path.write_text(
        (REPO / "stacks" / "local.yaml").read_text()
        + "health:\n  active: {profile: quick, every: 12h, max_nodes: 1}\n"
    )
    spec = load_spec(path)[0]
    nodes = [
        Node("head-001", "10.0.0.2", "head", "head", "local", {}, "c-head"),
        Node("node-001", "10.0.0.11", "gpu", "gpu", "local", {}, "c-1"),
    ]
    return slurm_vars(spec, nodes, load_hardware(), tmp_path / "munge.key")["slurm_health_loop_config"]
