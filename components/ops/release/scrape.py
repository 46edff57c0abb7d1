"""`python -m components.ops.release.scrape`: runs `python -m components.controllers.release.scrape`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("components.controllers.release.scrape", run_name="__main__", alter_sys=True)
