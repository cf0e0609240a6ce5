"""What the static provider's tests share: a spec, an inventory writer, and a fake ``ssh`` on PATH
that replays the real captures in tests/data/ssh/ (SOURCES.md says how each was made)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from clusterforge.spec.models import ClusterSpec

DATA = Path(__file__).resolve().parents[1] / "data" / "ssh"

# ssh's exit status for each capture (SOURCES.md).
EXIT = {
    "probe-root": 0,
    "probe-no-sudo": 0,
    "probe-rocky9-built": 0,
    "probe-dgx-h100-built": 0,
    "probe-dgx-h100-degraded-built": 0,
    "tofu-first-contact": 0,
    "bad-key": 255,
    "host-key-unknown": 255,
    "host-key-changed": 255,
    "connection-refused": 255,
    "connect-refused-test-net": 255,
    "unresolvable": 255,
}


def capture(case: str) -> tuple[int, str, str]:
    out, err = DATA / f"{case}.stdout.txt", DATA / f"{case}.stderr.txt"
    return (
        EXIT[case],
        out.read_text() if out.exists() else "",
        err.read_text() if err.exists() else "",
    )


def spec(
    inventory: Path, gpu_count: int = 2, gpu_type: str = "local", os_image: str = "debian-12", **ssh: Any
) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {
            "stack": "metal",
            "provider": {"kind": "static", "inventory": str(inventory), "ssh": ssh},
            "node_pools": [
                {"name": "head", "role": "head", "instance_type": "local", "count": 1},
                {
                    "name": "gpu",
                    "role": "gpu",
                    "instance_type": gpu_type,
                    "count": gpu_count,
                    "certification": "quick",
                },
            ],
            "software": {
                "os_image": os_image,
                "driver": {"branch": "535", "version": "535.247.01", "source": "distro"},
                "cuda": "11.8.0",
                "slurm": "22.05.8",
            },
            "orchestration": {"partitions": [{"name": "gpu", "pools": ["gpu"], "default": True}]},
            "certification": {"profiles": {"quick": {"suite": "quick"}}},
        }
    )


def write_inventory(
    folder: Path,
    gpu_hosts: Mapping[str, Mapping[str, Any]],
    head: Mapping[str, Any] | None = None,
    all_vars: Mapping[str, Any] | None = None,
) -> Path:
    """hosts.yml like inventories/static-example/: a head, the given compute hosts."""
    data = {
        "all": {
            "vars": dict(all_vars or {}),
            "children": {
                "slurm_controller": {"hosts": {"head-001": dict(head or {"ansible_host": "10.0.0.10"})}},
                "gpu_nodes": {"hosts": {name: dict(v) for name, v in gpu_hosts.items()}},
                "login_nodes": {"hosts": {}},
            },
        }
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "hosts.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


FAKE_SSH = """\
import json, os, sys
argv = sys.argv[1:]
host = argv[argv.index("--") - 1]
cases = json.loads(os.environ["FAKE_SSH_CASES"])
data = os.environ["FAKE_SSH_DATA"]
with open(os.path.join(os.environ["FAKE_SSH_LOG"], host + ".argv"), "w") as log:
    json.dump(argv, log)
    log.write("\\n" + sys.stdin.read())
case = cases[host]
for suffix, stream in ((".stdout.txt", sys.stdout), (".stderr.txt", sys.stderr)):
    path = os.path.join(data, case + suffix)
    if os.path.exists(path):
        stream.write(open(path).read())
sys.exit(int(os.environ["FAKE_SSH_EXIT_" + case.replace("-", "_")]))
"""


@contextmanager
def fake_ssh(folder: Path, cases: Mapping[str, str]) -> Iterator[Path]:
    """An ``ssh`` first on PATH answering each address with a capture; yields the folder where
    each call's argv and stdin are logged (``<address>.argv``)."""
    bindir, log = folder / "bin", folder / "ssh-log"
    bindir.mkdir(parents=True, exist_ok=True)
    log.mkdir(exist_ok=True)
    script = bindir / "ssh"
    script.write_text(f"#!{sys.executable}\n{FAKE_SSH}")
    script.chmod(0o755)
    saved = dict(os.environ)
    os.environ.update(
        PATH=f"{bindir}{os.pathsep}{saved.get('PATH', '')}",
        FAKE_SSH_CASES=json.dumps(dict(cases)),
        FAKE_SSH_DATA=str(DATA),
        FAKE_SSH_LOG=str(log),
        **{f"FAKE_SSH_EXIT_{c.replace('-', '_')}": str(rc) for c, rc in EXIT.items()},
    )
    try:
        yield log
    finally:
        os.environ.clear()
        os.environ.update(saved)
