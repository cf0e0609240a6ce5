"""Node certification suite, run on the node as ``python3 -m validators``.

The core is stdlib only and Python 3.9 syntax, so it runs on any node's system Python; torch
is imported only inside the workloads that need it. Never imports ``clusterforge``: what the
node must be reaches it as one NODE.json file (see SCHEMA.md).
"""

__version__ = "1.0.0"
