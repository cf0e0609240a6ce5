"""The health loop's decisions, pure (no I/O): strikes against hardware, lemons, remediation per
node, and which idle nodes the scheduled active check takes next. Callers read the journal and
Slurm and hand the results in (``clusterforge.health.state`` turns journal records into inputs).
The one writer is ``record.record_failure``: the certify stage appends a strike when a node fails.
"""
