"""The playbooks parse and the slurm role renders a GPU cluster's configuration from an inventory.

No nodes: `ansible-playbook --syntax-check` of every playbook against the hand-written static
example inventory, then the slurm templates rendered on this machine from that inventory's
variables (2 nodes with 8x H100 each) and read back.
"""

from __future__ import annotations

import fcntl
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventories" / "static-example" / "hosts.yml"
PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "ansible-home"
    return {
        **os.environ,
        "ANSIBLE_HOME": str(home),
        "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
        "ANSIBLE_REMOTE_TMP": str(home / "remote-tmp"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".clusterforge" / "collections"),
        "ANSIBLE_NOCOLOR": "1",
    }


def _playbook_cmd() -> str:
    return str(Path(sys.executable).parent / "ansible-playbook")


def test_playbooks_found() -> None:
    assert {p.name for p in PLAYBOOKS} >= {"site.yml", "cluster.yml", "certify.yml"}


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
@pytest.mark.slow
def test_playbook_syntax(playbook: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [_playbook_cmd(), "--syntax-check", "-i", str(INVENTORY), str(playbook)],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _render(tmp: Path, **overrides: object) -> Path:
    out = tmp / "out"
    out.mkdir()
    # Role defaults, then the inventory's group_vars over them (as Ansible's precedence would have it).
    variables = yaml.safe_load((REPO / "roles" / "slurm" / "defaults" / "main.yml").read_text())
    for path in sorted((INVENTORY.parent / "group_vars" / "all").glob("*.yml")):
        variables.update(yaml.safe_load(path.read_text()) or {})
    variables.update(render_host="gpu-001", out_dir=str(out), **overrides)
    extra = tmp / "vars.yml"
    extra.write_text(yaml.safe_dump(variables))
    result = subprocess.run(
        [
            _playbook_cmd(),
            "-i",
            str(INVENTORY),
            str(Path(__file__).parent / "render_slurm.yml"),
            "-e",
            f"@{extra}",
        ],
        capture_output=True,
        text=True,
        env=_env(tmp),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _render(tmp_path_factory.mktemp("render"))


@pytest.mark.slow
def test_slurm_conf_declares_typed_gpu_gres_and_nodes(rendered: Path) -> None:
    conf = (rendered / "slurm.conf").read_text()
    lines = conf.splitlines()
    assert "SlurmctldHost=head-001(192.0.2.10)" in lines
    assert "GresTypes=gpu" in lines
    assert "TopologyPlugin=topology/tree" in lines
    assert "ProctrackType=proctrack/cgroup" in lines  # real nodes: the role's defaults
    assert "HealthCheckProgram=/usr/local/sbin/clusterforge-healthcheck" in lines
    # slurm.conf(5) of 22.05 knows CredType only; jobs never inherit the submit host's memlock limit.
    assert "CredType=cred/munge" in lines and not [line for line in lines if line.startswith("CryptoType")]
    assert "PropagateResourceLimitsExcept=MEMLOCK" in lines
    node = next(line for line in lines if line.startswith("NodeName=gpu-001 "))
    for field in ("NodeAddr=192.0.2.21", "CPUs=192", "Sockets=2", "CoresPerSocket=48", "ThreadsPerCore=2"):
        assert field in node.split(), node
    assert "RealMemory=2000000" in node.split() and "Gres=gpu:h100:8" in node.split(), node
    assert any(line.startswith("PartitionName=gpu Nodes=gpu-001,gpu-002 Default=YES") for line in lines), conf


@pytest.mark.slow
def test_slurm_conf_without_the_health_loop_is_byte_for_byte_what_it_was(rendered: Path) -> None:
    # Rendered from this inventory by the template before the health loop existed (commit 3f4bae1).
    before = REPO / "tests" / "data" / "slurm" / "slurm-conf-static-example-health-off.txt"
    assert (rendered / "slurm.conf").read_bytes() == before.read_bytes()


@pytest.mark.slow
def test_slurm_conf_with_the_health_loop_preempts_its_hidden_partition(tmp_path: Path) -> None:
    lines = (_render(tmp_path, slurm_health_loop_enabled=True) / "slurm.conf").read_text().splitlines()
    assert "PreemptType=preempt/partition_prio" in lines and "PreemptMode=CANCEL" in lines
    assert (
        "PartitionName=gpu Nodes=gpu-001,gpu-002 Default=YES MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF"
        in lines
    )
    assert (
        "PartitionName=health Nodes=gpu-001,gpu-002 Default=NO MaxTime=INFINITE State=UP Hidden=YES "
        "AllowGroups=root PriorityTier=1 PreemptMode=CANCEL GraceTime=0" in lines
    )


@pytest.mark.slow
def test_gres_conf_names_device_files(rendered: Path) -> None:
    gres = [line for line in (rendered / "gres.conf").read_text().splitlines() if not line.startswith("#")]
    assert gres == [
        "NodeName=gpu-001 Name=gpu Type=h100 File=/dev/nvidia[0-7]",
        "NodeName=gpu-002 Name=gpu Type=h100 File=/dev/nvidia[0-7]",
    ]


@pytest.mark.slow
def test_gres_autodetects_with_nvml_only_where_asked(tmp_path: Path) -> None:
    # auto (the default, above) found no gpu_nvml.so on this machine: no AutoDetect line.
    nvml = _render(tmp_path, slurm_gres_autodetect="nvml")
    gres = [line for line in (nvml / "gres.conf").read_text().splitlines() if not line.startswith("#")]
    assert gres[0] == "AutoDetect=nvml" and gres[1].startswith("NodeName=gpu-001 Name=gpu Type=h100")


@pytest.mark.slow
def test_topology_and_cgroup_conf(rendered: Path) -> None:
    topo = [line for line in (rendered / "topology.conf").read_text().splitlines() if line and line[0] != "#"]
    assert topo == ["SwitchName=leaf-1 Nodes=gpu-001,gpu-002"]
    cgroup = (rendered / "cgroup.conf").read_text().splitlines()
    assert "CgroupPlugin=autodetect" in cgroup and "ConstrainDevices=yes" in cgroup


@pytest.mark.slow
def test_health_check_wrapper_is_valid_python(rendered: Path) -> None:
    script = rendered / "clusterforge-healthcheck.py"
    py_compile.compile(str(script), doraise=True)
    text = script.read_text()
    assert 'NODE = "gpu-001"' in text and "--checks" in text
    assert '"passive", "--state", "/var/lib/clusterforge/passive-state.json"' in text


@pytest.mark.slow
def test_health_check_wrapper_drains_once_for_many_xid_lines_from_the_passive_check(tmp_path: Path) -> None:
    """The rendered wrapper runs the passive check first; a node-fault Xid added by the test hook drains
    the node with one reason for many lines; application Xids alone drain nothing (no node, no container)."""
    state = tmp_path / "passive.json"
    out = _render(
        tmp_path,
        slurm_healthcheck_passive_command=[
            sys.executable,
            "-m",
            "validators",
            "passive",
            "--state",
            str(state),
            "--textfile",
            str(tmp_path),
        ],
        slurm_healthcheck_command=[sys.executable, "-c", "raise SystemExit(0)"],
    )
    script = out / "clusterforge-healthcheck.py"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "scontrol.log"
    (bin_dir / "scontrol").write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = update ]; then echo "$@" >> {calls}; exit 0; fi\n'
        'echo "NodeName=gpu-001 Arch=x86_64 State=IDLE ThreadsPerCore=1"\n'
    )
    # The kernel log: the captured dmesg -T lines of eight application Xid 13 (tests/data/xid/SOURCES.md).
    (bin_dir / "journalctl").write_text(
        f"#!/bin/sh\ncat {REPO / 'tests/data/xid/dmesg_T_xid13_no_pid.txt'}\n"
    )
    for tool in ("scontrol", "journalctl"):
        (bin_dir / tool).chmod(0o755)
    faults = tmp_path / "faults"
    faults.mkdir()
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "VALIDATORS_FAULT_DIR": str(faults),
        "HOME": str(tmp_path),
    }

    def run() -> str:
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=REPO
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    assert "passed" in run() and not calls.exists()  # application Xids only
    (faults / "xid").write_text("79\n" * 12)
    said = run()
    (update,) = calls.read_text().splitlines()
    assert update.startswith(
        "update NodeName=gpu-001 State=DRAIN Reason=clusterforge: xid: Xid 79 x12 on 0000:00:00"
    )
    assert "(node fault) (test hook)" in update and "drained: clusterforge: xid: Xid 79 x12" in said
    metrics = (tmp_path / "clusterforge_passive.prom").read_text()
    assert 'clusterforge_passive_new_xid_events{xid="79",kind="node"} 12' in metrics
    assert "passed" in run() and len(calls.read_text().splitlines()) == 1  # the same lines again: nothing new


@pytest.mark.slow
def test_health_check_wrapper_leaves_the_quick_checks_to_a_running_health_loop_job(tmp_path: Path) -> None:
    """Beside the health loop's own job (judged on its speed, on this node's CPU share) the wrapper runs
    the passive check only; without one, or with the loop off, the quick checks run as before."""
    ran = tmp_path / "quick-checks-ran"
    quick = [sys.executable, "-c", f"open({str(ran)!r}, 'a').write('x')"]
    passive = [sys.executable, "-c", 'print(\'{"drain": ""}\')']
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    squeue_args = tmp_path / "squeue.args"
    (bin_dir / "scontrol").write_text('#!/bin/sh\necho "NodeName=gpu-001 State=MIXED ThreadsPerCore=1"\n')
    # squeue's rule (its man page, -a/--all): a hidden partition's jobs (the loop's) only with --all.
    (bin_dir / "squeue").write_text(
        f'#!/bin/sh\necho "$@" > {squeue_args}\n'
        f'case " $* " in *" --all "*|*" -a "*) cat {tmp_path}/running 2>/dev/null;; esac\n'
    )
    for tool in ("scontrol", "squeue"):
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}

    def run(script: Path) -> str:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        return done.stderr

    loop_on = tmp_path / "on"
    loop_on.mkdir()
    lock = tmp_path / "validators.lock"
    script = (
        _render(
            loop_on,
            slurm_health_loop_enabled=True,
            slurm_healthcheck_command=quick,
            slurm_healthcheck_passive_command=passive,
            slurm_validators_lock=str(lock),
        )
        / "clusterforge-healthcheck.py"
    )
    (tmp_path / "running").write_text("4242\n")
    said = run(script)
    assert "quick checks left to the health loop's job 4242" in said and not ran.exists()
    assert squeue_args.read_text().split() == [
        "--all", "-h", "-w", "gpu-001", "-p", "health", "-t", "RUNNING", "-o", "%i",
    ]  # fmt: skip
    (tmp_path / "running").unlink()
    # The loop's job started after squeue answered (or waits for this check): it holds the node's lock.
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    said = run(script)
    assert f"quick checks left to the validators run holding {lock}" in said and not ran.exists()
    os.close(fd)
    assert "passed" in run(script) and ran.read_text() == "x"  # no loop job: the quick checks run
    loop_off = tmp_path / "off"
    loop_off.mkdir()
    off = _render(loop_off, slurm_healthcheck_command=quick, slurm_healthcheck_passive_command=passive)
    (tmp_path / "running").write_text("4242\n")
    squeue_args.unlink()
    assert "passed" in run(off / "clusterforge-healthcheck.py") and ran.read_text() == "xx"
    assert not squeue_args.exists()  # the loop is off: Slurm is not asked
