"""`invoke benchmark`: representative training and inference on the cluster, and what limits it.

Pure parts (no I/O): ``records`` (the nodes' output parsed once into typed records),
``breakdown`` (step-time parts on the critical path, throughput, scaling efficiency, the slow
rank), ``attribution`` (which part limits the step, in one line), ``inference`` and ``delivery``
(latency knee, loader against the training step's appetite), ``sizing`` (workload sizes per
node type, refused before submitting when they cannot fit), ``plan`` (which node counts can run
on certified idle nodes), ``jobs`` (job.json and sbatch argv), ``compare`` (regression against
the last comparable run, the spec's gates). I/O: ``runner`` (Slurm jobs through the head node),
``store`` (results under the stack's state folder), ``html`` (the people's page), ``run`` (the
whole command).
"""
