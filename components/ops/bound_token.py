"""`python -m components.ops.bound_token`: runs `python -m components.kube.bound_token`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("components.kube.bound_token", run_name="__main__", alter_sys=True)
