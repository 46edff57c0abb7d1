"""`python -m components.ops.plan_comparison`: runs `python -m components.reports.plan_comparison`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("components.reports.plan_comparison", run_name="__main__", alter_sys=True)
