"""Workloads of ``invoke benchmark``, run on the nodes as ordinary Slurm jobs.

``node`` (stdlib) is what each job starts once per node: it reads the job's ``job.json`` from
shared storage, starts the telemetry sampler, runs this node's ranks of the workload and writes
``node-<name>.json``. The workloads (``train``, ``infer``) import torch; ``data`` and
``telemetry`` are stdlib (the training loader uses ``data`` through torch's DataLoader).
Every rank writes JSON lines (one per step or measurement, flushed as it goes: a hung rank's
file says how far it got). Python 3.9 syntax: node Pythons are that old.
"""
