"""invoke task modules. Each module defines plain ``@task`` functions; the root ``tasks.py``
adds them to its Collection explicitly (no registration by import side effect)."""
