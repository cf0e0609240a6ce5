"""Role node_image: a node skips the node software only where its image's record names the digest
the spec asks for now AND every recorded item (package version and hold, file content, unit) is
still as recorded; any other node converges in full. Run on control-machine hosts against records
written here from the real drift probe's output (no container); the role reports no change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROBE = REPO / "clusterforge" / "drift" / "probe.py"
DIGEST = "0123456789abcdef"

PLAY = [
    {
        "name": "Sort the nodes",
        "hosts": "all",
        "gather_facts": False,
        "roles": [{"role": "node_image"}],
    }
]


def _record(path: Path, items_file: Path, **override: object) -> None:
    want = {"packages": ["dpkg"], "files": [str(items_file)], "units": []}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.read_text(), json.dumps(want)], capture_output=True, text=True
    )
    items = json.loads(out.stdout)["items"]
    path.write_text(json.dumps({"version": 1, "digest": DIGEST, "image": "test", "items": items, **override}))


@pytest.mark.slow
def test_only_a_matching_digest_with_unchanged_items_skips(tmp_path: Path) -> None:
    import ansible_runner

    content = tmp_path / "installed.conf"
    content.write_text("as baked\n")
    good, drifted, other = tmp_path / "good.json", tmp_path / "drifted.json", tmp_path / "other.json"
    _record(good, content)
    _record(other, content, digest="fedcba9876543210")
    drifted_file = tmp_path / "drifted.conf"
    drifted_file.write_text("as baked\n")
    _record(drifted, drifted_file)
    drifted_file.write_text("edited by hand\n")  # a file of the image changed since the bake

    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    hosts = {
        "baked": {**local, "node_image_software_digest": DIGEST, "node_image_record": str(good)},
        "drifted": {**local, "node_image_software_digest": DIGEST, "node_image_record": str(drifted)},
        "other-pins": {**local, "node_image_software_digest": DIGEST, "node_image_record": str(other)},
        "no-record": {
            **local,
            "node_image_software_digest": DIGEST,
            "node_image_record": str(tmp_path / "none"),
        },
        "base-image": {**local, "node_image_record": str(good)},  # pool without image: baked
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    **PLAY[0],
                    "post_tasks": [
                        {
                            "name": "Show the groups",
                            "ansible.builtin.debug": {
                                "msg": "{{ groups['node_software_baked'] | default([]) }}"
                            },
                            "run_once": True,
                        }
                    ],
                }
            ]
        )
    )
    home = tmp_path / "ansible-home"
    result = ansible_runner.run(
        private_data_dir=str(tmp_path),
        playbook=str(playbook),
        inventory=str(tmp_path / "hosts.yml"),
        extravars={"node_image_probe": str(PROBE)},
        envvars={
            "ANSIBLE_HOME": str(home),
            "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
            "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        },
        quiet=True,
    )
    assert result.rc == 0
    shown = [
        e["event_data"]["res"]["msg"]
        for e in result.events
        if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == "Show the groups"
    ]
    assert shown == [["baked"]]
    assert not result.stats.get("changed")
