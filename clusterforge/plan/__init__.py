"""`invoke plan` and rollouts: what a change does to each node, and in which batches to apply it.

Pure parts (``inputs`` fingerprints from a tree, ``impact`` the diff, ``rollout`` the batches)
are tested on simulated fleets; ``sources`` and ``live`` do the reading, ``render`` the output.
"""
