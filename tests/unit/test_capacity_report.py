"""The capacity report for the dev stack's own config (no cluster asked)."""

from components.gpu.requests import Quota
from components.ops.capacity_report import build_report, load_stack, main, render_markdown, render_table
from tests.support.tables import markdown_rows


def test_dev_report_numbers():
    a, b = build_report(load_stack("dev"))
    assert (a.tenant, a.cards, a.fleet) == ("team-a", "1 x NVIDIA A100 80GB", Quota(10, 81920, 100))
    assert a.requested == Quota(3, 60000, 90) and a.remaining == Quota(7, 21920, 10)
    assert a.allocated is None
    assert b.fleet == Quota(40, 92136, 400) and b.requested == Quota(1, 8000, 25)


def test_renderings():
    report = build_report(load_stack("dev"))
    table = render_table(report)
    assert table.splitlines()[0].startswith("tenant") and "team-a (1 x NVIDIA A100 80GB)" in table
    md = render_markdown(report, "dev")
    assert md.splitlines()[0] == "### GPU capacity: stack `dev`"
    header, *body = markdown_rows(md)
    assert header[:3] == ["tenant", "fleet", "quota"] and all(len(row) == len(header) for row in body)
    assert ["team-b (4 x NVIDIA L4 24GB)", "40 vGPU / 92,136 MB / 400 %"] in [row[:2] for row in body]


def test_unreachable_tenant_is_said_so():
    def broken(_kubeconfig):
        class Core:
            def list_pod_for_all_namespaces(self, **_kw):
                raise ConnectionError("connection refused")

        return Core()

    a, _ = build_report(load_stack("dev"), {"team-a": "kubeconfig"}, client=broken)
    assert a.allocated is None and a.note == "not reachable: connection refused"


def test_command(capsys):
    assert main(["--stack", "dev", "--markdown"]) == 0
    assert markdown_rows(capsys.readouterr().out)[0][:2] == ["tenant", "fleet"]


def test_a_mixed_fleet_is_reported_per_model_and_a_stack_file_path_is_read(capsys):
    from components.ops.capacity_report import main

    assert main(["--stack", "examples/Pulumi.mixed.yaml"]) == 0
    out = capsys.readouterr().out
    assert "team-a (160 x NVIDIA A100 80GB + 480 x NVIDIA L4 24GB)" in out
    assert "24,163,520 MB" in out  # 160 x 81920 + 480 x 23034
    assert main(["--stack", "no-such-stack"]) == 2
    err = capsys.readouterr().err
    assert "error: cannot read stack file" in err and "Traceback" not in err
