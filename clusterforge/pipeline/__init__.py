"""The per-node pipeline: provision -> configure -> certify -> admit, streamed node by node."""
