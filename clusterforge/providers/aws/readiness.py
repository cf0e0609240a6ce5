"""EC2 nodes the pipeline can talk to: ready before the first converge, rebooted by the pipeline.

Readiness (after `pulumi up` returns, instances are `running` but not yet usable):
1. the SSM agent is registered and online (``DescribeInstanceInformation``, 50 instances a call,
   ``PingStatus`` ``Online``): before that no command and no Ansible reach the node;
2. cloud-init has finished (``cloud-init status --wait``: 0 done, 2 done with recoverable errors
   since cloud-init 23.4, anything else failed) and nothing holds the dpkg lock (Ubuntu's
   apt-daily / unattended-upgrades run at first boot): the first apt task would otherwise fail on
   "Could not get lock /var/lib/dpkg/lock-frontend".

Reboots: amazon.aws's aws_ssm connection never reconnects after a reboot (issue 3044, open), so on
SSM stacks the driver role leaves ``/run/clusterforge/reboot-required`` instead of rebooting; the
pipeline finds it, reboots those instances through EC2 (``RebootInstances``), waits until each is
back online with a new ``/proc/sys/kernel/random/boot_id``, and converges them again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from clusterforge.node.remote import Runner
from clusterforge.providers.base import Node

REBOOT_MARKER = "/run/clusterforge/reboot-required"  # roles/nvidia_driver/vars/main.yml
BOOT_ID = "/proc/sys/kernel/random/boot_id"
READY_TIMEOUT_S = 1800.0
POLL_S = 10.0
# cloud-init then the dpkg front-end lock, as one shell script run by SSM on the node.
READY_SCRIPT = r"""
rc=0; cloud-init status --wait >/dev/null 2>&1 || rc=$?
case "$rc" in 0|2) ;; *) echo "cloud-init status --wait exited $rc"; cloud-init status --long 2>&1 | tail -5; exit 3;; esac
python3 - <<'PY'
import fcntl, sys, time
deadline = time.monotonic() + 900
for path in ("/var/lib/dpkg/lock-frontend", "/var/lib/dpkg/lock"):
    while True:
        try:
            with open(path, "a") as handle:
                fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except FileNotFoundError:
            break
        except OSError:
            if time.monotonic() > deadline:
                print(f"{path} still held after 900 s (apt-daily or unattended-upgrades at boot)")
                sys.exit(4)
            time.sleep(5)
PY
"""

RunnerFactory = Callable[..., Runner]


def _chunks(items: Sequence[str], size: int) -> list[Sequence[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def online(ssm: Any, instance_ids: Sequence[str]) -> set[str]:
    """Instances whose SSM agent answers now (``PingStatus`` Online)."""
    found: set[str] = set()
    for chunk in _chunks(list(instance_ids), 50):
        token = ""
        while True:
            kwargs: dict[str, Any] = {
                "Filters": [{"Key": "InstanceIds", "Values": list(chunk)}],
                "MaxResults": 50,
            }
            if token:
                kwargs["NextToken"] = token
            page = ssm.describe_instance_information(**kwargs)
            found |= {
                i["InstanceId"]
                for i in page.get("InstanceInformationList", [])
                if i.get("PingStatus") == "Online"
            }
            token = page.get("NextToken", "")
            if not token:
                break
    return found


def wait_online(
    ssm: Any,
    nodes: Sequence[Node],
    timeout_s: float = READY_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    also: Callable[[Node], bool] = lambda node: True,
) -> dict[str, str]:
    """Wait until every node's agent is online (and ``also(node)`` holds); {node: why not} at the deadline."""
    deadline = clock() + timeout_s
    waiting = {n.provider_id: n for n in nodes}
    while waiting:
        up = online(ssm, list(waiting))
        for iid in sorted(up):
            if also(waiting[iid]):
                del waiting[iid]
        if not waiting or clock() >= deadline:
            break
        sleep(POLL_S)
    return {
        n.name: f"SSM agent not online after {timeout_s:g} s (instance {n.provider_id})"
        for n in waiting.values()
    }


def _each(nodes: Sequence[Node], work: Callable[[Node], str]) -> dict[str, str]:
    """``work`` on every node side by side; {node: problem} for those that answered one."""
    if not nodes:
        return {}
    with ThreadPoolExecutor(max_workers=min(32, len(nodes))) as pool:
        answers = dict(zip([n.name for n in nodes], pool.map(work, nodes), strict=True))
    return {name: why for name, why in answers.items() if why}


def wait_ready(
    ssm: Any, nodes: Sequence[Node], runner: RunnerFactory, timeout_s: float = READY_TIMEOUT_S, **clock: Any
) -> dict[str, str]:
    """Agent online, cloud-init done, dpkg lock free, on every node; {node: why not}."""
    problems = wait_online(ssm, nodes, timeout_s, **clock)

    def settle(node: Node) -> str:
        rc, out, err = runner(node, timeout_s=timeout_s)(["sh", "-c", READY_SCRIPT])
        return "" if rc == 0 else f"not ready: {' '.join((out + ' ' + err).split())[-200:] or f'exit {rc}'}"

    return {**problems, **_each([n for n in nodes if n.name not in problems], settle)}


def reboot_pending(nodes: Sequence[Node], runner: RunnerFactory) -> list[Node]:
    """The nodes whose driver role left a reboot to the pipeline."""

    def pending(node: Node) -> str:
        rc, _, _ = runner(node, timeout_s=60)(["test", "-e", REBOOT_MARKER])
        return "pending" if rc == 0 else ""

    marked = _each(nodes, pending)
    return [n for n in nodes if n.name in marked]


def reboot(
    ec2: Any,
    ssm: Any,
    nodes: Sequence[Node],
    runner: RunnerFactory,
    timeout_s: float = READY_TIMEOUT_S,
    **clock: Any,
) -> dict[str, str]:
    """Reboot through EC2 and wait for each node to come back (online, a new boot id); {node: why not}."""
    if not nodes:
        return {}
    before: dict[str, str] = {}
    for node in nodes:
        rc, out, _ = runner(node, timeout_s=60)(["cat", BOOT_ID])
        before[node.name] = out.strip() if rc == 0 else ""
    ec2.reboot_instances(InstanceIds=[n.provider_id for n in nodes])

    def rebooted(node: Node) -> bool:
        rc, out, _ = runner(node, timeout_s=60)(["cat", BOOT_ID])
        return rc == 0 and out.strip() not in ("", before[node.name])

    return wait_online(ssm, nodes, timeout_s, also=rebooted, **clock)
