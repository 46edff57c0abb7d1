"""`python -m components.ops.image_list`: runs `python -m components.reports.image_list`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("components.reports.image_list", run_name="__main__", alter_sys=True)
