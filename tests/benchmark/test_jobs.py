"""job.json and sbatch argv (clusterforge/benchmark/jobs.py)."""

from __future__ import annotations

import shlex

from clusterforge.benchmark.jobs import Address, JobSet, job_config, sbatch_argv
from clusterforge.benchmark.sizing import sizes_for
from clusterforge.catalog import load_hardware
from clusterforge.spec.models import Benchmark

HW = load_hardware()


def test_a_job_takes_its_nodes_whole_and_writes_into_its_folder() -> None:
    jobs = JobSet("20261202T101500Z", "/shared", 15)
    argv = sbatch_argv(jobs, "train-2n", ("node-001", "node-002"))
    assert argv[:2] == ["sbatch", "--parsable"]
    assert "-w" in argv and argv[argv.index("-w") + 1] == "node-001,node-002"
    assert "--exclusive" in argv and argv[argv.index("-t") + 1] == "15"
    assert (
        argv[argv.index("-o") + 1] == "/shared/.clusterforge/benchmark/20261202T101500Z/train-2n/job-%j.out"
    )
    wrap = shlex.split(argv[argv.index("--wrap") + 1])
    assert wrap[:2] == ["srun", "--ntasks-per-node=1"]
    assert wrap[2:5] == ["/usr/bin/python3", "-m", "validators.workloads.benchmark.node"]
    assert wrap[-1] == "/shared/.clusterforge/benchmark/20261202T101500Z/train-2n/job.json"
    assert not any(a.startswith("--gpus") for a in argv)


def test_gpu_jobs_take_every_gpu_and_a_container_image_through_pyxis() -> None:
    jobs = JobSet("r", "/fsx", 30, gpus_per_node=8, container_image="nvcr.io#nvidia/pytorch:25.01-py3")
    argv = sbatch_argv(jobs, "train-4n", ("gpu-001", "gpu-002", "gpu-003", "gpu-004"))
    assert "--gpus-per-node=8" in argv
    wrap = argv[argv.index("--wrap") + 1]
    assert wrap.startswith("export PYTHONPATH=/opt/clusterforge/validators; srun ")
    assert "--container-image=nvcr.io#nvidia/pytorch:25.01-py3" in wrap
    assert "--container-mounts=/fsx:/fsx,/opt/clusterforge/validators:/opt/clusterforge/validators" in wrap
    assert " python3 -m validators.workloads.benchmark.node " in wrap


def test_job_config_carries_sizes_nodes_and_a_port_per_job() -> None:
    jobs = JobSet("r1", "/shared", 10)
    sizes = sizes_for(Benchmark(), HW["local"])
    nodes = [Address("node-001", "10.89.42.11"), Address("node-002", "10.89.42.12")]
    cfg = job_config(jobs, "train-2n", "train", nodes, sizes, 3)
    assert cfg["nodes"] == [
        {"name": "node-001", "address": "10.89.42.11"},
        {"name": "node-002", "address": "10.89.42.12"},
    ]
    assert cfg["port"] == 29623 and cfg["device"] == "cpu" and cfg["ranks_per_node"] == 1
    assert cfg["out"] == "/shared/.clusterforge/benchmark/r1/train-2n"
    assert cfg["data"]["path"].startswith("/shared/.clusterforge/benchmark/data/")
    assert cfg["timeout_s"] == 10 * 60 - 45 and cfg["train"]["collective_timeout_s"] == 300
    # the same data shape is the same folder, run after run
    assert jobs.data_path(sizes) == JobSet("r2", "/shared", 10).data_path(sizes)
