"""The cluster's state in a backend every runner reaches: journal, baselines, reports, the lock.

    backend.py   the interface: conditional get/put/delete on named objects
    fsdir.py     a folder (local, the head node's, a shared filesystem): lockf + atomic rename
    s3.py        S3: If-None-Match / If-Match conditional writes
    lease.py     the stack lock as a lease in the backend (renewed; a dead holder's lease runs out)
    snapshot.py  the versioned state: content-addressed objects + a manifest written conditionally
    index.py     reports/index.json (latest verdict and report files per node)
    session.py   what a command does: lock, read once, write back; read-only copies
    config.py    the backend a spec names (``state: {backend: ...}``)

The default backend, ``local``, is the working copy itself with the flock of clusterforge/lock.py.
"""

from clusterforge.state.errors import ForeignState, StateConflict, StateError
from clusterforge.state.session import changing, holder, reading

__all__ = ["ForeignState", "StateConflict", "StateError", "changing", "holder", "reading"]
