"""``python -m llmbench.sim``: the same as ``llmbench sim``, without the rest of the CLI.

``spawn_sim`` starts the simulator this way, so a benchmark's server process imports only
the simulator.
"""

import sys

from llmbench.sim.cli import main

if __name__ == "__main__":
    sys.exit(main())
