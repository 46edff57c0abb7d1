"""`python -m components.ops.release`: runs `python -m components.controllers.release`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("components.controllers.release", run_name="__main__", alter_sys=True)
