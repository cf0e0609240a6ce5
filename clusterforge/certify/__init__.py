"""Certification from the workstation: NODE.json rendering, Slurm admission, report collection."""
