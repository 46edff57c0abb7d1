"""`python -m components.ops.capacity_report`: runs `python -m components.reports.capacity_report`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("components.reports.capacity_report", run_name="__main__", alter_sys=True)
