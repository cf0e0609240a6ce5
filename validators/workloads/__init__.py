"""Torch workloads the checks run as subprocesses (``python3 validators/workloads/X.py``).

Each prints one JSON object on its last stdout line. They import torch; the suite's core
never imports them.
"""
