"""Each GPU role refuses inconsistent inputs in its preflight (or argument spec), before it changes
anything, with a message that names the variable, the bad value and the spec key to fix.

Runs on the workstation with ``connection: local``: a refused role stops right after the OS
dispatch (facts, include_vars), so nothing on this machine is touched."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import ansible_runner
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

GOOD_DRIVER = {
    "nvidia_driver_branch": "570",
    "nvidia_driver_version": "570.133.20",
    "nvidia_driver_enabled": True,
}
# id, role, vars, text the refusal must contain (None: the role must accept the input and skip itself)
CASES: list[tuple[str, str, dict[str, Any], str | None]] = [
    (
        "driver-branch",
        "nvidia_driver",
        {**GOOD_DRIVER, "nvidia_driver_branch": "535"},
        "software.driver.branch",
    ),
    (
        "driver-empty",
        "nvidia_driver",
        {**GOOD_DRIVER, "nvidia_driver_version": ""},
        "software.driver.version",
    ),
    (
        "driver-open-too-old",
        "nvidia_driver",
        {**GOOD_DRIVER, "nvidia_driver_branch": "470", "nvidia_driver_version": "470.256.02"},
        "needs driver 515.43.04 or later",
    ),
    (
        "driver-module-choice",
        "nvidia_driver",
        {**GOOD_DRIVER, "nvidia_driver_kernel_module": "closed"},
        "open, proprietary",
    ),
    (
        "fm-mismatch",
        "fabric_manager",
        {
            "fabric_manager_enabled": True,
            "fabric_manager_version": "570.124.06",
            "fabric_manager_driver_version": "570.133.20",
        },
        "Set software.fabric_manager equal to software.driver.version",
    ),
    (
        "driver-headers-unknown-kernel",
        "nvidia_driver",
        # As on a real node (this workstation may itself be a container, where the check is skipped).
        {**GOOD_DRIVER, "_nvidia_driver_kernel": "6.9.0-custom", "_nvidia_driver_in_container": False},
        "set nvidia_driver_kernel_headers_packages",
    ),
    ("cuda-inexact", "cuda_toolkit", {"cuda_toolkit_version": "12.8"}, "exact version such as 12.8.1"),
    ("nccl-no-cuda", "nccl", {"nccl_version": "2.26.2", "nccl_cuda_version": ""}, "software.cuda"),
    ("dcgm-3", "dcgm", {"dcgm_version": "3.3.5"}, "exact DCGM 4 version"),
    ("efa-bad", "efa", {"efa_enabled": True, "efa_installer_version": "latest"}, "software.efa_installer"),
    ("dcgm-not-in-spec", "dcgm", {"dcgm_version": ""}, None),
    # Unsupported systems stop at the OS dispatch (the detected release is overridden for the test).
    *[
        (
            f"os-{role}",
            role,
            {**extra, f"_{role}_os": "Rocky-9"},
            "supports Debian-12, Ubuntu-22.04, Ubuntu-24.04",
        )
        for role, extra in [
            ("nvidia_driver", GOOD_DRIVER),
            ("cuda_toolkit", {"cuda_toolkit_version": "12.8.1"}),
            ("nccl", {"nccl_version": "2.26.2", "nccl_cuda_version": "12.8.1"}),
            ("dcgm", {"dcgm_version": "4.2.3"}),
            ("fabric_manager", {"fabric_manager_enabled": True}),
            ("container_runtime", {"container_runtime_toolkit_version": "1.17.5"}),
            ("efa", {"efa_enabled": True}),
        ]
    ],
    ("efa-not-enabled", "efa", {"efa_enabled": False}, None),
]


def _case(case_id: str, role: str, role_vars: dict[str, Any]) -> dict[str, Any]:
    """One block: include the role with the case's variables; record whether it accepted or refused."""
    return {
        "name": f"Case {case_id}",
        "block": [
            {"name": "Include the role", "ansible.builtin.include_role": {"name": role}, "vars": role_vars},
            {"name": "Accepted", "ansible.builtin.debug": {"msg": f"CASE {case_id} ACCEPTED"}},
        ],
        "rescue": [
            {
                "name": "Refused",
                "ansible.builtin.debug": {
                    "msg": f"CASE {case_id} REFUSED: {{{{ ansible_failed_result.msg }}}}"
                },
            }
        ],
    }


def _playbook() -> list[dict[str, Any]]:
    return [
        {
            "name": "GPU roles refuse bad inputs",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": True,
            "gather_subset": ["min"],
            "tasks": [_case(i, r, v) for i, r, v, _ in CASES],
        }
    ]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    work = tmp_path_factory.mktemp("gpu-preflight")
    playbook = work / "preflight.yml"
    playbook.write_text(yaml.safe_dump(_playbook(), sort_keys=False))
    home = work / "ansible-home"
    result = ansible_runner.run(
        private_data_dir=str(work),
        playbook=str(playbook),
        inventory="localhost ansible_connection=local ansible_python_interpreter=" + sys.executable,
        envvars={
            "ANSIBLE_HOME": str(home),
            "ANSIBLE_LOCAL_TEMP": str(home / "tmp"),
            "ANSIBLE_REMOTE_TMP": str(home / "remote-tmp"),
            "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
            "ANSIBLE_NOCOLOR": "1",
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        },
        quiet=True,
    )
    assert result.rc == 0, (work / "artifacts").as_posix()
    verdicts: dict[str, str] = {}
    for event in result.events:
        msg = ((event.get("event_data") or {}).get("res") or {}).get("msg")
        if event.get("event") == "runner_on_ok" and isinstance(msg, str) and msg.startswith("CASE "):
            case_id, rest = msg[5:].split(" ", 1)
            verdicts[case_id] = rest
        changed = ((event.get("event_data") or {}).get("res") or {}).get("changed")
        assert not (event.get("event") == "runner_on_ok" and changed), (
            f"a refused role changed something: {event}"
        )
    return verdicts


@pytest.mark.parametrize(("case_id", "expect"), [(c[0], c[3]) for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_refusal_says_what_to_change(outcome: dict[str, str], case_id: str, expect: str | None) -> None:
    verdict = outcome.get(case_id, "<no verdict>")
    if expect is None:
        assert verdict == "ACCEPTED"
    else:
        assert verdict.startswith("REFUSED"), verdict
        assert expect in verdict, verdict
