"""Changing a running stack: the rolling, certification-gated upgrade and node replacement.

``upgrade.upgrade`` (`invoke upgrade`): plan -> batches -> ``executor.execute`` with the cluster's
steps (``cluster_steps.ClusterSteps``). ``replace.replace`` (`invoke replace`): one node on a new
machine. ``identity``: machine and GPU ids, and the GPUs of machines that failed.
"""
