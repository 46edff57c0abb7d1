"""`python -m components.controllers.release`: the release controller (see daemon.main)."""

import sys

from components.controllers.release.daemon import main

sys.exit(main())
