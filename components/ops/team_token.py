"""`python -m components.ops.team_token`: runs `python -m components.kube.team_token`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("components.kube.team_token", run_name="__main__", alter_sys=True)
