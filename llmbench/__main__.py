"""``python -m llmbench``: the same entry point as the ``llmbench`` command."""

import sys

from llmbench.cli import main

sys.exit(main())
