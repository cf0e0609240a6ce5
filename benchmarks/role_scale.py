"""The slurm role's per-host work against the node count, without any container.

    .venv/bin/python benchmarks/role_scale.py [--nodes 16,256,1024,4096] [--hosts 4] [--base GIT_REF]

Runs the slurm role's checks (preflight.yml) and configuration (config.yml, rendered into a temp
folder per host) on ``--hosts`` control-machine hosts (local connection) for a node list of each
size, as the compute play does, and prints per size: wall seconds, seconds per host, task and
loop-item results per host, and the Jinja-heavy tasks' share. With ``--base`` the same is run with
the roles of that git revision (e.g. the commit before issue 24) beside this tree's, so the two
are measured side by side. The last line, for scripts:
`role scale: N nodes, W s for H hosts (base B s), growth exponent K (base L)` (N the largest size;
K fitted on log(wall seconds) against log(nodes) over the sizes; Ansible's start-up, about the same
at every size, keeps K under 1 even where the per-host work grows: read the results per host too).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

# The play and the role's variables are the role scale test's (tests/roles/test_role_scale.py): every
# node held here.
sys.path.insert(0, str(ROOT))
from tests.roles.test_role_scale import SLURM_PLAY, slurm_vars  # noqa: E402


def run(roles: Path, work: Path, hosts: int, nodes: int) -> tuple[float, int]:
    import ansible_runner

    work.mkdir(parents=True, exist_ok=True)
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    # Laid out as clusterforge.inventory writes it: the node list in group_vars/all/slurm.yml (loaded
    # by the vars plugin), not in hosts.yml (which every inventory plugin would parse again).
    inventory = work / "inventory" / "hosts.yml"
    (inventory.parent / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
    inventory.write_text(
        yaml.safe_dump({"all": {"hosts": {f"gpu-{i:04d}": local for i in range(1, hosts + 1)}}})
    )
    (inventory.parent / "group_vars" / "all" / "slurm.yml").write_text(
        yaml.safe_dump(slurm_vars(nodes, work, held_every=1))
    )
    playbook = work / "play.yml"
    playbook.write_text(yaml.safe_dump(SLURM_PLAY, sort_keys=False))
    home = work / "ansible-home"
    start = time.perf_counter()
    result = ansible_runner.run(
        private_data_dir=str(work),
        playbook=str(playbook),
        inventory=str(inventory),
        extravars={"_slurm_config_dir": str(work / "etc") + "/{{ inventory_hostname }}"},
        envvars={
            "ANSIBLE_HOME": str(home),
            "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
            "ANSIBLE_ROLES_PATH": str(roles),
            "ANSIBLE_FORKS": str(hosts),
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        },
        quiet=True,
    )
    wall = time.perf_counter() - start
    if result.rc != 0:
        raise SystemExit(f"{roles} at {nodes} nodes: ansible-playbook failed (rc {result.rc}); see {work}")
    results = sum(
        1
        for e in result.events
        if e.get("event", "").startswith(("runner_on_", "runner_item_on_"))
        and e["event"] != "runner_on_start"
    )
    return wall, results // hosts


def slope(xs: list[int], ys: list[float]) -> float:
    lx, ly = [math.log(x) for x in xs], [math.log(max(y, 1e-6)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="16,256,1024,4096")
    ap.add_argument("--hosts", type=int, default=4, help="control-machine hosts the play runs on")
    ap.add_argument("--base", default="", help="git revision whose roles/ run beside this tree's")
    args = ap.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    if len(set(sizes)) < 2:
        ap.error(
            f"--nodes {args.nodes}: give two sizes or more (the growth exponent is a slope), e.g. 16,256"
        )
    work = Path(tempfile.mkdtemp(prefix="cf-role-scale-"))
    trees = {"this tree": ROOT / "roles"}
    if args.base:
        dest = work / "base"
        dest.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.base, "roles"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
        trees[f"base {args.base}"] = dest / "roles"
    walls: dict[str, list[float]] = {k: [] for k in trees}
    print(f"{'roles':<24} {'nodes':>6} {'wall s':>8} {'s/host':>8} {'results/host':>13}", flush=True)
    for n in sizes:
        for label, roles in trees.items():
            wall, results = run(roles, work / f"{label.replace(' ', '_')}-{n}", args.hosts, n)
            walls[label].append(wall)
            print(f"{label:<24} {n:>6} {wall:>8.1f} {wall / args.hosts:>8.2f} {results:>13}", flush=True)
    mine = walls["this tree"]
    line = f"role scale: {sizes[-1]} nodes, {mine[-1]:.1f} s for {args.hosts} hosts"
    base_label = next((k for k in trees if k != "this tree"), None)
    if base_label:
        line += f" (base {walls[base_label][-1]:.1f} s)"
    line += f", growth exponent {slope(sizes, mine):.2f}"
    if base_label:
        line += f" (base {slope(sizes, walls[base_label]):.2f})"
    shutil.rmtree(work, ignore_errors=True)
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
