"""Fault-injection hooks for tests (off by default): a file on the node switches one on.

An integration test makes one node misbehave without touching its hardware, e.g.
``podman exec NODE sh -c 'mkdir -p /etc/clusterforge/faults && touch /etc/clusterforge/faults/nondeterministic'``.
Every check that honours a hook says so in its evidence while it is active, so a report of a
node with a hook switched on can never be mistaken for a healthy one. Hooks:

- ``nondeterministic`` (matmul-burnin): one repetition of one device's product is changed by one
  ulp in one element; the file may hold that device's index (default 0).
- ``vanished-device`` (matmul-burnin): one device fails before the start barrier (on a GPU it asks
  for a device ordinal past the last: CUDA's own "invalid device ordinal"); the file may hold its
  index (default 0). The check must name it within seconds and leave no worker behind.
- ``competing-process`` (matmul-burnin): a second process computes matmuls on one device (the
  file may hold its index) while the burn-in runs; that device's rate must fail.
- ``corrupt-checkpoint`` (checkpoint-restart): one byte in the middle of the largest checkpoint
  shard is flipped between the save and the resume (data corrupted at rest).
- ``xid`` (the passive check, validators/passive.py): each line is appended to the kernel log as
  read; a line that is only a number N becomes an Xid N line (``echo 79 >> .../faults/xid``).

``VALIDATORS_TEST_FAULT=drop-optimizer`` (an environment variable, workloads/ckpt_train.py) makes
checkpoint-restart's resume drop the optimizer state.

``VALIDATORS_FAULT_DIR`` moves the folder (unit tests; never set on a real node).
"""

from __future__ import annotations

import os
from typing import Optional

FAULT_DIR = "/etc/clusterforge/faults"


def fault_path(name: str) -> str:
    return os.path.join(os.environ.get("VALIDATORS_FAULT_DIR") or FAULT_DIR, name)


def active_fault(name: str) -> Optional[str]:
    """The hook file's content (stripped, maybe "") when the hook is on, else None."""
    path = fault_path(name)
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return None
