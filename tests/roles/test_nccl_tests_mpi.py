"""nccl-tests on EFA nodes is built against the EFA installer's Open MPI, as AWS builds it
(aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/nccl-tests.Dockerfile:
``make MPI=1 MPI_HOME=/opt/amazon/openmpi/ ...``), not Ubuntu's libopenmpi-dev. Rendered with
Ansible's own templating from the role's files and the inventory's host variables (no node)."""

from __future__ import annotations

from pathlib import Path

import yaml

from clusterforge.catalog import load_hardware
from clusterforge.inventory import EFA_OPENMPI, host_vars
from clusterforge.providers.base import Node
from tests.roles.test_role_vars import render

REPO = Path(__file__).resolve().parents[2]
TASKS = yaml.safe_load((REPO / "roles" / "nccl" / "tasks" / "nccl_tests.yml").read_text())
BLOCK = next(t for t in TASKS if "block" in t)["block"]


def task(name: str) -> dict:
    return next(t for t in BLOCK if t["name"] == name)


def node(instance_type: str) -> Node:
    return Node("gpu-001", "10.0.0.11", "gpu", "gpu", instance_type, {"ansible_host": "10.0.0.11"})


def test_efa_nodes_get_the_efa_installers_open_mpi() -> None:
    hv = host_vars(node("p5.48xlarge"), load_hardware())
    assert (hv["nccl_tests_mpi_home"], hv["nccl_tests_mpi_system"]) == ("/opt/amazon/openmpi", False)
    assert EFA_OPENMPI == "/opt/amazon/openmpi"
    plain = host_vars(node("g5.xlarge"), load_hardware())
    assert "nccl_tests_mpi_home" not in plain, "a type without EFA keeps the distribution's Open MPI"


def test_the_build_links_the_chosen_open_mpi_and_installs_no_other() -> None:
    cmd = task("Build nccl-tests")["ansible.builtin.command"]["cmd"]
    efa = {"nccl_tests_version": "2.14.1", "nccl_cuda_version": "12.8.1", "nccl_tests_mpi_home": EFA_OPENMPI}
    built = render("nccl", "ubuntu-22.04", cmd, ansible_facts={"processor_vcpus": 4}, **efa)
    assert "MPI=1 MPI_HOME=/opt/amazon/openmpi" in built and "NCCL_HOME=/usr" in built
    packages = task("Install the build tools")["ansible.builtin.apt"]["name"]
    assert render("nccl", "ubuntu-22.04", packages, nccl_tests_mpi_system=False) == ["make", "g++"]
    assert "libopenmpi-dev" in render("nccl", "ubuntu-22.04", packages)


def test_a_build_made_against_another_mpi_is_rebuilt() -> None:
    """make leaves binaries newer than their sources alone: the marker names the MPI of the build,
    so a node built against Ubuntu's Open MPI before gets the EFA build on the next run."""
    marker = "{{ _nccl_tests_mpi_marker }}"
    ubuntu = render("nccl", "ubuntu-22.04", marker, nccl_tests_version="2.14.1")
    efa = render("nccl", "ubuntu-22.04", marker, nccl_tests_version="2.14.1", nccl_tests_mpi_home=EFA_OPENMPI)
    assert efa == "/opt/nccl-tests/2.14.1/.clusterforge-mpi-_opt_amazon_openmpi" != ubuntu
    remove = task("Remove a build made against another MPI")
    assert remove["ansible.builtin.file"] == {"path": "{{ _nccl_tests_dir }}", "state": "absent"}
    names = [t["name"] for t in BLOCK]
    assert names.index("Remove a build made against another MPI") < names.index("Build nccl-tests")
    assert names.index("Build nccl-tests") < names.index("Record the MPI the build was made with")


def test_efa_runs_before_nccl_so_its_open_mpi_is_there_to_build_against() -> None:
    plays = yaml.safe_load((REPO / "playbooks" / "node_software.yml").read_text())
    (roles,) = [
        [r["role"] for r in p["roles"]] for p in plays if "nccl" in [r["role"] for r in p.get("roles", [])]
    ]
    assert roles.index("efa") < roles.index("nccl")
