"""Pulumi components of the cluster, one ``ComponentResource`` per concern.

Nothing here creates a resource at import time; ``cluster.build_cluster`` wires the components
from a loaded ``ClusterSpec`` and is what ``__main__.py`` (and the mock tests) call.
"""
