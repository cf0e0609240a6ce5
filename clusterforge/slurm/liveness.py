"""Is each node answering the Slurm controller? Asked before the multi-node job, per node.

A node whose slurmd has stopped still shows ``idle`` until the controller's SlurmdTimeout runs
out (minutes), and a multi-node job that lands on it hangs ``COMPLETING`` and fails on every
node (measured on the local stack: ``sbatch --wait`` returned 233 and all four nodes were
drained). So each node is checked alone first:

1. its Slurm state (``sinfo``): not registered, DOWN or NOT_RESPONDING fail at once;
2. a one-task probe job on that node alone, inside the certification hold, all nodes at once,
   each bounded by ``timeout``: a slurmd that does not answer makes its probe fail or time out.

Only nodes that pass both go on to the network check. Leftover probe jobs are cancelled by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from clusterforge.slurm.parse import SinfoNode

HeadRun = Callable[..., tuple[int, str, str]]
CHECK_ID = "slurmd-responding"
PROBE_TIMEOUT_S = 45
TIMED_OUT = 124  # what `timeout` exits with

# $1 reservation, $2 seconds, $3 job name, then the nodes. One line of output per node:
# "<node> <srun exit status>". Probes run concurrently; the script waits for all of them.
PROBE_SCRIPT = r"""
res=$1; secs=$2; name=$3; shift 3
for n in "$@"; do
  ( timeout "$secs" srun -Q --reservation="$res" -J "$name" -w "$n" -N 1 -n 1 -t 1 true \
      >/dev/null 2>&1; echo "$n $?" ) &
done
wait
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


def probe_argv(reservation: str, nodes: Sequence[str], job_name: str, timeout_s: int) -> list[str]:
    return ["sh", "-c", PROBE_SCRIPT, "sh", reservation, str(timeout_s), job_name, *sorted(nodes)]


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
    """Nodes that cannot take a job now, with the reason; every other node answered."""
    problems = {n: why for n in nodes if (why := state_problem(n, states.get(n)))}
    probe = [n for n in nodes if n not in problems]
    if not probe:
        return problems
    rc, out, err = head(probe_argv(reservation, probe, job_name, timeout_s))
    if rc != 0 and not out.strip():
        detail = " ".join((err or "no output").split())[-160:]
        return {**problems, **{n: f"cannot run the probe job on the head node: {detail}" for n in probe}}
    found = parse_probe(out, probe, timeout_s)
    if found:
        head(["scancel", f"--name={job_name}"])  # probes stuck on a dead slurmd
    return {**problems, **found}
