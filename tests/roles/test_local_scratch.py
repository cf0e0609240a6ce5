"""local_scratch's device choice, templated by Ansible itself on facts shaped as a p5 node's and
a g5 node's `ansible_facts['devices']` (models as EC2 names them: "Amazon EC2 NVMe Instance
Storage" for instance store, "Amazon Elastic Block Store" for EBS). The mdadm/mkfs path needs
real disks and is not run here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROLE = Path(__file__).resolve().parents[2] / "roles" / "local_scratch"
STORE = "Amazon EC2 NVMe Instance Storage"
EBS = "Amazon Elastic Block Store"


def _trusted(value: Any) -> Any:
    """Role files are trusted templates (ansible-core >= 2.19 only renders trusted strings)."""
    from ansible.template import trust_as_template

    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def _template(expression: str, facts: dict[str, Any], **overrides: Any) -> Any:
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    role_vars = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
    }
    variables = {**{k: _trusted(v) for k, v in role_vars.items()}, "ansible_facts": facts, **overrides}
    return Templar(loader=DataLoader(), variables=variables).template(_trusted(expression))


def _devices(models: dict[str, str]) -> dict[str, Any]:
    # sysfs pads the model with spaces; the role must not care.
    return {"devices": {name: {"model": f"{model}    ", "size": "3.49 TB"} for name, model in models.items()}}


P5 = _devices({"nvme0n1": EBS, **{f"nvme{n}n1": STORE for n in range(1, 9)}})


def test_a_p5_node_stripes_its_eight_instance_store_disks():
    found = _template("{{ _local_scratch_found }}", P5)
    assert found == [f"/dev/nvme{n}n1" for n in range(1, 9)]  # never the EBS root disk
    assert _template("{{ _local_scratch_target }}", P5) == "/dev/md/scratch"


def test_one_disk_is_used_as_it_is():
    facts = _devices({"nvme0n1": EBS, "nvme1n1": STORE})  # g5.xlarge: one 250 GB NVMe
    assert _template("{{ _local_scratch_found }}", facts) == ["/dev/nvme1n1"]
    assert _template("{{ _local_scratch_target }}", facts) == "/dev/nvme1n1"


@pytest.mark.parametrize("facts", [_devices({"nvme0n1": EBS}), {"devices": {"sda": {}}}, {}])
def test_no_instance_store_means_nothing_to_do(facts: dict[str, Any]):
    assert _template("{{ _local_scratch_found }}", facts) == []


def test_listed_devices_win_over_the_facts():
    found = _template(
        "{{ _local_scratch_found }}", P5, local_scratch_devices=["/dev/nvme2n1", "/dev/nvme3n1"]
    )
    assert found == ["/dev/nvme2n1", "/dev/nvme3n1"]
