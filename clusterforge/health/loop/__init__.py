"""The health loop on the head node: one round every few minutes, by itself (issue 28).

Run as ``python -m clusterforge.health.loop --config /etc/clusterforge/health-loop.json`` by a
systemd timer the ``health_loop`` role installs on the head node where the spec enables it
(``health.active.profile`` set and a shared storage path). Each round (``round.run_round``):

1. ``scontrol ping``: no controller answers -> the round pauses (journalled), nothing is drained.
2. Adopt the loop's own queued jobs (by job name) and read the finished ones: a job that left no exit
   status was preempted (or cancelled) -> retried later, never a failure; one that finished is judged
   by the project's judges (``node.reports.verdict_of`` and ``certify.fleet.judge.judge_run`` with the
   copied baseline), and a failure is a strike on the hardware (``health.record``).
3. Decide with the existing policy (``health.plan.health_plan`` over ``health.live.with_slurm``): drain,
   re-certify (inside the loop's own maintenance reservation), return only on a pass, replace or flag a
   lemon only as the policy says; choose idle nodes for the active check and submit one low-priority
   job per node into the hidden ``health`` partition.

Pure parts: ``config`` (what the workstation renders), ``slurm`` (argv and parsers), ``inputs``
(journal + Slurm -> the policy's inputs), ``metrics`` (the textfile). The I/O: ``round``.
"""
