"""The skip decision and the change phrases: pure code, on single cases and a simulated fleet."""

from __future__ import annotations

import random

from clusterforge.drift.decide import Baseline, decide
from clusterforge.drift.digest import Gathered, item_changes

INPUTS = {"role slurm": "a1", "playbooks": "b2", "inventory": "c3", "managed": "d4"}
ITEMS = {
    "package slurmd": "hold installed 22.05.8-4+deb12u3",
    "file /etc/slurm/slurm.conf": "sha256 0123456789abcdef mode 0644 owner 0:0",
    "unit slurmd": "enabled active",
}
BASE = Baseline("2026-12-01T12:03:41+00:00", dict(INPUTS), dict(ITEMS))


def test_unchanged_node_is_skipped_and_says_since_when() -> None:
    d = decide(BASE, True, dict(INPUTS), Gathered(dict(ITEMS)))
    assert not d.converge and d.why == "unchanged since 12:03, digest matches"


def test_every_reason_to_converge() -> None:
    assert decide(None, True, INPUTS, Gathered(ITEMS)).converge  # never converged with a baseline
    assert decide(BASE, False, INPUTS, Gathered(ITEMS)).converge  # last configure failed
    assert decide(BASE, True, INPUTS, Gathered(ITEMS), force=True).why.startswith("--converge")
    changed = decide(BASE, True, {**INPUTS, "role slurm": "zz"}, Gathered(ITEMS))
    assert changed.converge and changed.why == "inputs changed: role slurm"
    lost = decide(BASE, True, INPUTS, Gathered({}, "probe exited 255: ssh: connect timed out"))
    assert lost.converge and "not assumed clean" in lost.why and "timed out" in lost.why
    assert decide(BASE, True, INPUTS, None).converge


def test_drift_names_the_items_in_words() -> None:
    now = dict(ITEMS)
    now["package slurmd"] = "install installed 22.05.8-4+deb12u3"
    now["file /etc/slurm/slurm.conf"] = "sha256 ffffffffffffffff mode 0600 owner 0:0"
    now["unit slurmd"] = "disabled inactive"
    d = decide(BASE, True, INPUTS, Gathered(now))
    assert d.converge
    assert d.changes == (
        "file /etc/slurm/slurm.conf: content changed, mode 0644 -> 0600",
        "package slurmd: hold removed",
        "unit slurmd: enabled active -> disabled inactive",
    )
    assert d.why.startswith("drift: file /etc/slurm/slurm.conf: content changed")


def test_removed_package_and_file() -> None:
    now = {**ITEMS, "package slurmd": "absent", "file /etc/slurm/slurm.conf": "absent"}
    assert item_changes(ITEMS, now) == ["file /etc/slurm/slurm.conf: removed", "package slurmd: removed"]
    now = {**ITEMS, "package slurmd": "deinstall config-files 22.05.8-4+deb12u3"}
    assert item_changes(ITEMS, now) == [
        "package slurmd: not installed (deinstall config-files 22.05.8-4+deb12u3)"
    ]


def test_simulated_fleet_converges_exactly_the_drifted_nodes() -> None:
    """5,000 nodes, a few hundred touched by hand at random: exactly those converge."""
    rng = random.Random(15)
    touched = set(rng.sample(range(5000), 300))
    unreachable = set(rng.sample(sorted(set(range(5000)) - touched), 50))
    converged = set()
    for i in range(5000):
        items = dict(ITEMS)
        if i in touched:
            key = rng.choice(sorted(items))
            items[key] = items[key] + " (edited)"
        got = Gathered({}, "unreachable") if i in unreachable else Gathered(items)
        if decide(BASE, True, INPUTS, got).converge:
            converged.add(i)
    assert converged == touched | unreachable
