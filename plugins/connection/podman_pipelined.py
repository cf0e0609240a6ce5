"""containers.podman.podman, with pipelining: one ``podman exec`` per module instead of four.

Without pipelining Ansible makes a temporary folder in the node, copies the module there, runs
it and removes the folder, each a ``podman exec`` (about 0.15 s of podman start-up each here).
The collection's plugin could pipeline, but it does not pass ``--interactive`` to ``podman exec``,
so the module sent on stdin never reached the node's Python, and pipelining was turned off
rather than fixed (containers/ansible-podman-collections#275, after molecule-podman#2). This
plugin is that one plugin with ``--interactive`` where there is data for stdin, and pipelining on.

On 22 small tasks against one node container (2026-12-02, 2 cores): 21-23 s through
containers.podman.podman, 8.5-10.5 s through this plugin.
"""

from __future__ import annotations

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible.plugins.connection import ConnectionBase, ensure_connect
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

# The options are the collection plugin's, plus pipelining (default on: what this plugin is for).
DOCUMENTATION = """
    name: podman_pipelined
    short_description: Run tasks in an existing podman container, modules pipelined on stdin
    description:
        - containers.podman.podman (its options, its file transfer through C(podman mount)) with
          pipelining, which needs C(podman exec --interactive) to hand the module to the node.
    options:
      remote_addr:
        description:
          - The ID of the container you want to access.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description:
            - User specified via name or UID which is used to execute commands inside the container. If you
              specify the user via UID, you must set C(ANSIBLE_REMOTE_TMP) to a path that exits
               inside the container and is writable by Ansible.
        ini:
          - section: defaults
            key: remote_user
        env:
          - name: ANSIBLE_REMOTE_USER
        vars:
          - name: ansible_user
      podman_extra_args:
        description:
          - Extra arguments to pass to the podman command line.
        default: ''
        ini:
          - section: defaults
            key: podman_extra_args
        vars:
          - name: ansible_podman_extra_args
        env:
          - name: ANSIBLE_PODMAN_EXTRA_ARGS
      pipelining:
        description:
          - Send each module to the container's Python on the exec's stdin (one C(podman exec)
            per task) instead of copying it into a temporary folder first (four).
        type: boolean
        default: true
        env:
          - name: ANSIBLE_PIPELINING
        ini:
          - section: defaults
            key: pipelining
        vars:
          - name: ansible_pipelining
      podman_executable:
        description:
          - Executable for podman command.
        default: podman
        vars:
          - name: ansible_podman_executable
        env:
          - name: ANSIBLE_PODMAN_EXECUTABLE
"""


class Connection(PodmanConnection):
    transport = "podman_pipelined"
    has_pipelining = True

    @ensure_connect
    def exec_command(self, cmd, in_data=None, sudoable=False):
        if in_data is None:  # no pipelined module: exactly the collection's exec
            return super().exec_command(cmd, in_data=None, sudoable=sudoable)
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        exec_args = ["exec", "--interactive"]
        if self.user:
            exec_args.extend(("--user", self.user))
        return self._podman(exec_args, shlex.split(to_native(cmd, errors="surrogate_or_strict")), in_data)
