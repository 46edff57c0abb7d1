"""`python -m components.ops.release`: the release controller (see daemon.main)."""

import sys

from components.ops.release.daemon import main

sys.exit(main())
