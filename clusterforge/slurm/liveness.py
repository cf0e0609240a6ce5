"""Is each node answering the Slurm controller? Asked before the multi-node job, per node.

A node whose slurmd has stopped still shows ``idle`` until the controller's SlurmdTimeout runs
out (minutes), and a multi-node job that lands on it hangs ``COMPLETING`` and fails on every
node (measured on the local stack: ``sbatch --wait`` returned 233 and all four nodes were
drained). So each node is checked alone first:

1. its Slurm state (``sinfo``): not registered, DOWN or NOT_RESPONDING fail at once;
2. a one-task probe job on that node alone, inside the certification hold, many nodes at once
   (``PROBE_PARALLEL`` at a time, so thousands of nodes do not start thousands of sruns on the
   head at once), each bounded by ``timeout``: a slurmd that does not answer makes its probe fail
   or time out.

Only nodes that pass both go on to the network check. Leftover probe jobs are cancelled by name.
One head command probes every node: the node names go on its stdin, never as arguments (ssh
joins argv into one shell line, and Linux refuses one argument over 128 KiB).

A probe fails on every node when the controller itself is down (srun cannot allocate): so when any
probe failed, ``scontrol ping`` decides whether the controller answers, and when it does not the
step raises ``ControllerError`` instead of failing nodes for the controller's fault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from clusterforge.slurm.admission import Admission
from clusterforge.slurm.parse import SinfoNode

HeadRun = Callable[..., tuple[int, str, str]]
CHECK_ID = "slurmd-responding"
PROBE_TIMEOUT_S = 45
PROBE_PARALLEL = 128  # probes running at once on the head node
TIMED_OUT = 124  # what `timeout` exits with

# $1 reservation, $2 seconds, $3 job name, $4 probes at once; the nodes on stdin, one a line. One
# line of output per node: "<node> <srun exit status>" (one short write each: lines never mix).
PROBE_SCRIPT = r"""
xargs -r -n 1 -P "$4" sh -c '
  timeout "$1" srun -Q --reservation="$2" -J "$3" -w "$4" -N 1 -n 1 -t 1 true >/dev/null 2>&1
  echo "$4 $?"' sh "$2" "$1" "$3"
""".strip()


def state_problem(name: str, node: SinfoNode | None) -> str:
    """Why ``node``'s Slurm state rules it out of a job now; "" when it may run one."""
    if node is None:
        return "not registered with the Slurm controller (is slurmd running and in slurm.conf?)"
    if "not_responding" in node.flags:
        return f"slurmd is not responding to the controller (sinfo state {node.display})"
    if node.state in ("down", "fail", "unknown"):
        why = f", reason: {node.reason}" if node.reason else ""
        return f"Slurm has the node {node.state.upper()} (sinfo state {node.display}{why})"
    return ""


def probe_argv(reservation: str, job_name: str, timeout_s: int, parallel: int = PROBE_PARALLEL) -> list[str]:
    """The probe command; its stdin is ``probe_stdin(nodes)``."""
    return ["sh", "-c", PROBE_SCRIPT, "sh", reservation, str(timeout_s), job_name, str(parallel)]


def probe_stdin(nodes: Sequence[str]) -> str:
    return "".join(f"{n}\n" for n in sorted(nodes))


def parse_probe(out: str, nodes: Sequence[str], timeout_s: int) -> dict[str, str]:
    """Problems by node from the probe script's output; a node with no line failed to report."""
    codes: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            codes[parts[0]] = int(parts[1])
    problems = {}
    for name in nodes:
        rc = codes.get(name)
        if rc == 0:
            continue
        if rc is None:
            problems[name] = "the probe job gave no answer for this node"
        elif rc == TIMED_OUT:
            problems[name] = (
                f"a 1-task probe job did not finish within {timeout_s} s: slurmd is not answering the controller"
            )
        else:
            problems[name] = (
                f"a 1-task probe job failed (srun exit {rc}): slurmd is not answering the controller"
            )
    return problems


def unresponsive(
    head: HeadRun,
    states: dict[str, SinfoNode],
    nodes: Sequence[str],
    reservation: str,
    job_name: str,
    timeout_s: int = PROBE_TIMEOUT_S,
) -> dict[str, str]:
    """Nodes that cannot take a job now, with the reason; every other node answered. Raises
    ControllerError when the probes failed because no controller answers."""
    problems = {n: why for n in nodes if (why := state_problem(n, states.get(n)))}
    probe = [n for n in nodes if n not in problems]
    if not probe:
        return problems
    rc, out, err = head(probe_argv(reservation, job_name, timeout_s), stdin=probe_stdin(probe))
    if rc != 0 and not out.strip():
        Admission(head).check_controller()
        detail = " ".join((err or "no output").split())[-160:]
        return {**problems, **{n: f"cannot run the probe job on the head node: {detail}" for n in probe}}
    found = parse_probe(out, probe, timeout_s)
    if found:
        Admission(head).check_controller()  # srun fails everywhere while the controller is away
        head(["scancel", f"--name={job_name}"])  # probes stuck on a dead slurmd
        if len(found) == len(probe) > 1:
            # Every probe failed, and the controller answers now: it may have come back since.
            _, out, _ = head(probe_argv(reservation, job_name, timeout_s), stdin=probe_stdin(probe))
            found = parse_probe(out, probe, timeout_s)
            if found:
                head(["scancel", f"--name={job_name}"])
    return {**problems, **found}
