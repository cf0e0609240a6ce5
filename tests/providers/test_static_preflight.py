"""Static preflight: each host that cannot be used is named, with the fix, in one line, before
anything changes on any host. ssh is a fake on PATH replaying real captures (tests/data/ssh/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterforge.catalog import load_hardware
from clusterforge.providers.static import StaticProvider
from clusterforge.providers.static.facts import mismatches, parse_facts
from clusterforge.providers.static.inventory import InventoryHost
from clusterforge.providers.static.preflight import ssh_problem
from clusterforge.providers.static.ssh import HostSsh
from clusterforge.spec.models import StaticSsh
from tests.providers.static_fakes import DATA, capture, fake_ssh, spec, write_inventory

HW = load_hardware()


def _preflight(tmp_path: Path, cases: dict[str, str], **ssh: object) -> list[str]:
    """Preflight of a head (10.0.0.10) and one compute host per case; lines as printed."""
    gpu_hosts = {f"gpu-{i:03d}": {"ansible_host": addr} for i, addr in enumerate(cases, start=1)}
    inventory = write_inventory(tmp_path / "site", gpu_hosts)
    the_spec = spec(inventory, gpu_count=len(gpu_hosts), **ssh)  # type: ignore[arg-type]
    with fake_ssh(tmp_path, {"10.0.0.10": "probe-root", **cases}):
        problems = StaticProvider(rendered=tmp_path / "rendered").preflight(the_spec)
    return [p.render() for p in problems]


def test_healthy_hosts_pass(tmp_path: Path) -> None:
    assert _preflight(tmp_path, {"10.0.0.21": "probe-root", "10.0.0.22": "probe-root"}) == []


@pytest.mark.parametrize(
    ("case", "check_id", "says"),
    [
        ("connection-refused", "static-unreachable", "Connection refused): check ansible_host/ansible_port"),
        ("connect-refused-test-net", "static-unreachable", "cannot reach"),
        ("unresolvable", "static-unreachable", "Could not resolve hostname"),
        ("bad-key", "static-ssh-key", "refused the key (root@127.0.0.1: Permission denied (publickey).)"),
        ("host-key-unknown", "static-host-key-unknown", "ssh-keyscan -p 22 10.0.0.22"),
        ("host-key-changed", "static-host-key-changed", "do not go on"),
        ("probe-no-sudo", "static-no-sudo", "(sudo: a password is required)"),
        ("probe-rocky9-built", "static-os", "runs rocky-9.3, which the roles do not support"),
    ],
)
def test_each_unusable_host_is_one_line_naming_it(
    tmp_path: Path, case: str, check_id: str, says: str
) -> None:
    lines = _preflight(tmp_path, {"10.0.0.21": "probe-root", "10.0.0.22": case})
    assert len(lines) == 1, lines
    line = lines[0]
    assert "\n" not in line
    assert line.startswith("error: gpu-002: ") and line.endswith(f"[{check_id}]")
    assert says in line


def test_no_sudo_says_how_to_grant_it(tmp_path: Path) -> None:
    (line,) = _preflight(tmp_path, {"10.0.0.21": "probe-no-sudo"})
    assert "cfnosudo cannot sudo without a password" in line
    assert "'cfnosudo ALL=(ALL) NOPASSWD: ALL' in /etc/sudoers.d/" in line


def test_no_sudo_needed_when_become_is_off(tmp_path: Path) -> None:
    assert _preflight(tmp_path, {"10.0.0.21": "probe-no-sudo"}, become=False) == []


def test_a_supported_os_other_than_the_specs_is_named(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "site", {"gpu-001": {"ansible_host": "10.0.0.21"}})
    the_spec = spec(inventory, gpu_count=1, os_image="ubuntu-22.04")
    with fake_ssh(tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "probe-root"}):
        problems = StaticProvider(rendered=tmp_path / "rendered").preflight(the_spec)
    # The head runs the same capture: both are named, each on its own line.
    assert [p.message.split(":")[0] for p in problems] == ["head-001", "gpu-001"]
    assert "runs debian-12 but software.os_image is ubuntu-22.04" in problems[1].message


def test_probe_goes_on_stdin_with_the_host_key_policy(tmp_path: Path) -> None:
    inventory = write_inventory(
        tmp_path / "site",
        {"gpu-001": {"ansible_host": "10.0.0.21", "ansible_user": "ops", "ansible_port": 2200}},
    )
    known = tmp_path / "known_hosts"
    known.write_text("")
    the_spec = spec(inventory, gpu_count=1, known_hosts=str(known))
    with fake_ssh(tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "probe-root"}) as log:
        assert StaticProvider(rendered=tmp_path / "r").preflight(the_spec) == []
    argv_line, stdin = (log / "10.0.0.21.argv").read_text().split("\n", 1)
    argv = json.loads(argv_line)
    assert argv[-3:] == ["10.0.0.21", "--", "sh -s"]
    assert "StrictHostKeyChecking=yes" in argv and f"UserKnownHostsFile={known}" in argv
    assert argv[argv.index("-p") + 1] == "2200" and argv[argv.index("-l") + 1] == "ops"
    assert stdin.startswith("echo probe=clusterforge-static-1")


def test_trust_on_first_use_is_accept_new_and_still_probes(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "site", {"gpu-001": {"ansible_host": "10.0.0.21"}})
    the_spec = spec(inventory, gpu_count=1, host_keys="trust-on-first-use")
    with fake_ssh(tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "tofu-first-contact"}) as log:
        assert StaticProvider(rendered=tmp_path / "r").preflight(the_spec) == []
    argv = json.loads((log / "10.0.0.21.argv").read_text().split("\n", 1)[0])
    assert "StrictHostKeyChecking=accept-new" in argv


def test_unsafe_options_and_missing_files_stop_before_any_ssh(tmp_path: Path) -> None:
    inventory = write_inventory(
        tmp_path / "site",
        {
            "gpu-001": {
                "ansible_host": "10.0.0.21",
                "ansible_ssh_common_args": "-o StrictHostKeyChecking=no",
            },
            "gpu-002": {"ansible_host": "10.0.0.22", "ansible_ssh_private_key_file": str(tmp_path / "nokey")},
        },
    )
    the_spec = spec(inventory, gpu_count=2, known_hosts=str(tmp_path / "absent"))
    with fake_ssh(
        tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "probe-root", "10.0.0.22": "probe-root"}
    ) as log:
        problems = StaticProvider(rendered=tmp_path / "r").preflight(the_spec)
    ids = sorted(p.check_id for p in problems)
    assert ids == ["static-known-hosts", "static-ssh-key", "static-ssh-unsafe"]
    assert not (log / "10.0.0.21.argv").exists() and not (log / "10.0.0.22.argv").exists()


def test_inventory_where_clusterforge_renders_is_refused(tmp_path: Path) -> None:
    inventory = write_inventory(tmp_path / "rendered" / "metal", {"gpu-001": {"ansible_host": "10.0.0.21"}})
    with fake_ssh(tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "probe-root"}):
        problems = StaticProvider(rendered=tmp_path / "rendered").preflight(spec(inventory, gpu_count=1))
    assert [p.check_id for p in problems] == ["static-inventory-place"]


# --- hardware facts against the declared type ----------------------------------------------


def _declared_dgx(case: str) -> list[str]:
    rc, out, _ = capture(case)
    assert rc == 0
    return mismatches(parse_facts(out), HW["dgx-h100"])


def test_dgx_h100_facts_match_the_catalogue() -> None:
    facts = parse_facts(capture("probe-dgx-h100-built")[1])
    assert len(facts.gpu_pci) == 8 and facts.os == "ubuntu-22.04" and len(facts.ib_ports) == 8
    assert _declared_dgx("probe-dgx-h100-built") == []


def test_fewer_gpus_and_a_slow_hca_name_expected_and_found() -> None:
    assert _declared_dgx("probe-dgx-h100-degraded-built") == [
        "GPUs: expected 8 H100, found 7 NVIDIA PCI GPU(s)",
        "InfiniBand ports: expected 8 at 400 Gb/s, found 7 (ports: mlx5_0:1 400, mlx5_3:1 400, mlx5_4:1 400, "
        "mlx5_5:1 400, mlx5_6:1 400, mlx5_9:1 400, mlx5_10:1 400, mlx5_11:1 200)",
    ]


def test_a_machine_without_gpus_declared_as_dgx_fails_by_name(tmp_path: Path) -> None:
    inventory = write_inventory(
        tmp_path / "site",
        {
            "gpu-001": {"ansible_host": "10.0.0.21"},
            "gpu-002": {"ansible_host": "10.0.0.22", "clusterforge_instance_type": "dgx-h100"},
        },
    )
    with fake_ssh(
        tmp_path, {"10.0.0.10": "probe-root", "10.0.0.21": "probe-root", "10.0.0.22": "probe-root"}
    ):
        problems = StaticProvider(rendered=tmp_path / "r").preflight(spec(inventory, gpu_count=2))
    lines = [p.render() for p in problems]
    assert all(line.startswith("error: gpu-002: declared dgx-h100, ") for line in lines), lines
    joined = "\n".join(lines)
    assert "CPUs: expected 224, found 2" in joined
    assert "memory: expected 2097152 MiB (at least 1992294 visible), found 24105 MiB" in joined
    assert "GPUs: expected 8 H100, found 0" in joined
    assert "InfiniBand ports: expected 8 at 400 Gb/s, found 0 (ports: none)" in joined


def test_gpu_model_differs_from_declared() -> None:
    facts = parse_facts(capture("probe-dgx-h100-built")[1].replace("H100 80GB HBM3", "A100-SXM4-80GB"))
    assert "GPU model: expected H100, found NVIDIA A100-SXM4-80GB" in mismatches(facts, HW["dgx-h100"])


def test_ssh_problem_falls_back_to_sshs_own_last_line() -> None:
    host = HostSsh.resolve(InventoryHost("gpu-009", "gpu", {"ansible_host": "10.0.0.9"}), StaticSsh())
    problem = ssh_problem(host, 255, "kex_exchange_identification: read: Connection reset by peer\n")
    assert problem.check_id == "static-unreachable"
    other = ssh_problem(host, 1, "something else\nthe last word\n")
    assert other.check_id == "static-ssh-failed" and "exit 1: the last word" in other.message


def test_captures_are_all_known() -> None:
    from tests.providers.static_fakes import EXIT

    cases = {p.name.split(".")[0] for p in DATA.glob("*.txt")}
    assert cases == set(EXIT)
