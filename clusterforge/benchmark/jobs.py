"""The benchmark's Slurm jobs: their folders on shared storage, job.json and sbatch argv (pure).

One job per run (workload x node count), submitted one after another so that runs never share
nodes or the network: each figure is measured alone. A job takes its nodes whole (``-w`` the
planned nodes, ``--exclusive``; on GPU nodes every GPU), starts ``validators.workloads.benchmark.node``
once per node with ``srun``, and writes everything into its folder
``<shared>/.clusterforge/benchmark/<run id>/<run key>/``. The dataset lives beside the runs,
``<shared>/.clusterforge/benchmark/data/<shape digest>/``, and is written once (a ``prepare`` job)
for every later run of that shape. With ``benchmark.container_image`` and pyxis on the cluster,
``srun`` runs the node driver in that image with shared storage and the validators suite mounted.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass
from typing import Any

from clusterforge.benchmark.sizing import Sizes

NODE_DRIVER = "validators.workloads.benchmark.node"
VALIDATORS_HOME = "/opt/clusterforge/validators"  # the validators_runtime role's link (on PYTHONPATH)
BASE_PORT = 29620
PENDING_S = 120  # how long a job may wait to start before it is given up


@dataclass(frozen=True)
class Address:
    name: str
    address: str


@dataclass(frozen=True)
class JobSet:
    """Where and how this benchmark run's jobs go."""

    run_id: str
    shared_path: str
    time_limit_min: int
    gpus_per_node: int = 0
    container_image: str = ""
    python: str = "/usr/bin/python3"

    @property
    def root(self) -> str:
        return f"{self.shared_path.rstrip('/')}/.clusterforge/benchmark"

    @property
    def folder(self) -> str:
        return f"{self.root}/{self.run_id}"

    def run_folder(self, key: str) -> str:
        return f"{self.folder}/{key}"

    def data_path(self, sizes: Sizes) -> str:
        d = sizes.data
        shape = json.dumps([d["shards"], d["samples_per_shard"], d["sample_bytes"]])
        return f"{self.root}/data/{hashlib.sha256(shape.encode()).hexdigest()[:12]}"

    @property
    def deadline_s(self) -> float:
        return self.time_limit_min * 60 + PENDING_S

    @property
    def node_timeout_s(self) -> int:
        """The node driver stops its processes this long into the job, before Slurm's limit
        kills the job, so that it still writes which rank hung."""
        return max(30, self.time_limit_min * 60 - 45)

    def job_name(self, key: str) -> str:
        return f"clusterforge-bench-{self.run_id}-{key}"


def job_config(
    jobs: JobSet, key: str, workload: str, nodes: list[Address], sizes: Sizes, port_index: int
) -> dict[str, Any]:
    """job.json of one job (read by validators/workloads/benchmark/node.py and the workloads)."""
    return {
        "schema": "clusterforge-benchmark-job",
        "version": 1,
        "run_id": jobs.run_id,
        "key": key,
        "workload": workload,
        "nodes": [{"name": n.name, "address": n.address} for n in nodes],
        "ranks_per_node": sizes.ranks_per_node,
        "device": sizes.device,
        "dtype": sizes.dtype,
        "port": BASE_PORT + port_index,
        "model": sizes.model,
        "train": {**sizes.train, "collective_timeout_s": min(300, jobs.node_timeout_s)},
        "infer": sizes.infer,
        "data": {**sizes.data, "path": jobs.data_path(sizes)},
        "out": jobs.run_folder(key),
        "timeout_s": jobs.node_timeout_s,
        "telemetry_interval_s": 0.5,
    }


def srun_line(jobs: JobSet, config: str) -> str:
    driver = [jobs.python, "-m", NODE_DRIVER, "--config", config]
    srun = ["srun", "--ntasks-per-node=1"]
    if jobs.container_image:
        mounts = f"{jobs.shared_path}:{jobs.shared_path},{VALIDATORS_HOME}:{VALIDATORS_HOME}"
        srun += [f"--container-image={jobs.container_image}", f"--container-mounts={mounts}"]
        driver[0] = "python3"  # the image's own Python and torch
        return f"export PYTHONPATH={shlex.quote(VALIDATORS_HOME)}; {shlex.join(srun + driver)}"
    return shlex.join(srun + driver)


def sbatch_argv(jobs: JobSet, key: str, nodes: tuple[str, ...]) -> list[str]:
    folder = jobs.run_folder(key)
    gpus = [f"--gpus-per-node={jobs.gpus_per_node}"] if jobs.gpus_per_node else []
    return [
        "sbatch", "--parsable", "-N", str(len(nodes)), "-w", ",".join(nodes), "--ntasks-per-node=1",
        "--exclusive", *gpus, "-t", str(jobs.time_limit_min), "-J", jobs.job_name(key),
        "-o", f"{folder}/job-%j.out", "--wrap", srun_line(jobs, f"{folder}/job.json"),
    ]  # fmt: skip
