"""``python3 -m validators``: see validators/cli.py."""

import sys

from validators.cli import main

sys.exit(main())
