"""The capacity report for the dev stack's own config (no cluster asked)."""

from components.domain.requests import Quota
from components.reports.capacity_report import build_report, load_stack, main, render_markdown, render_table
from tests.support.tables import markdown_rows


def test_dev_report_numbers():
    a, b = build_report(load_stack("dev"))
    assert (a.tenant, a.cards, a.fleet) == ("team-a", "1 x NVIDIA A100 80GB", Quota(10, 81920, 100))
    assert a.requested == Quota(3, 60000, 90) and a.free == Quota(7, 21920, 10)
    assert a.quota == Quota(10, 163840, 200) and a.headroom == Quota(7, 103840, 110)
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
    from components.reports.capacity_report import main

    assert main(["--stack", "examples/Pulumi.mixed.yaml"]) == 0
    out = capsys.readouterr().out
    assert "team-a (160 x NVIDIA A100 80GB + 480 x NVIDIA L4 24GB)" in out
    assert "24,163,520 MB" in out  # 160 x 81920 + 480 x 23034
    assert main(["--stack", "no-such-stack"]) == 2
    err = capsys.readouterr().err
    assert "error: no stack 'no-such-stack'" in err and "Traceback" not in err


# -- a tenant that cannot be read: one line naming it and what failed, never a traceback ---------
def unreachable_kubeconfig() -> str:
    from tests.support.cluster import free_port

    server = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        f"clusters: [{{name: t, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: t, user: {token: x}}]\ncontexts: [{name: t, context: {cluster: t, user: t}}]\n"
    )


def test_the_picture_of_an_unreachable_tenant_is_one_line_naming_it(monkeypatch, tmp_path, capsys):
    """With --live and --picture: team-a's API server does not answer, team-b's kubeconfig is not
    one; each gets one line naming the tenant and what failed, the table still says so, the
    exit status says something asked for was not drawn."""
    import components.reports.capacity_report as cr

    kubeconfigs = {"team-a": unreachable_kubeconfig(), "team-b": "not: [a kubeconfig"}
    monkeypatch.setattr(cr, "stack_kubeconfigs", lambda _stack: kubeconfigs)
    assert main(["--stack", "dev", "--live", "--picture", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    lines = err.splitlines()
    a = [line for line in lines if "tenant team-a:" in line]
    b = [line for line in lines if "tenant team-b:" in line]
    assert len(a) == 1 and len(b) == 1 and len(lines) == 2, err
    assert a[0].startswith("python -m components.reports.capacity_report: error: tenant team-a: no live picture")
    assert "Connection refused" in a[0] and "object at 0x" not in a[0]
    assert "not reachable: " in out and "Connection refused" in out  # the table's column says it too
    assert not list(tmp_path.iterdir())


def test_the_other_tenants_pictures_are_still_drawn(monkeypatch, tmp_path, capsys):
    import components.reports.capacity_report as cr

    monkeypatch.setattr(cr, "stack_kubeconfigs", lambda _stack: {"team-a": unreachable_kubeconfig()})
    assert main(["--stack", "dev", "--live", "--picture", str(tmp_path)]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team-b.png", "team-b.svg"]  # declared
    assert "error: tenant team-a: no live picture" in capsys.readouterr().err


def test_a_tenant_refusing_the_credential_is_named_with_the_status():
    from kubernetes.client import ApiException

    from components.reports.capacity_report import pictures

    def refusing(_kubeconfig):
        class Core:
            def list_node(self, **_kw):
                raise ApiException(status=401, reason="Unauthorized")

        return Core()

    drawn, failed = pictures(load_stack("dev"), {"team-b": "kubeconfig"}, client=refusing)
    assert [p.tenant for p in drawn] == ["team-a"]
    assert failed == [
        "tenant team-b: no live picture, its API server could not be read: the API server answered 401 Unauthorized"
    ]


def test_a_kubeconfig_that_cannot_be_read_is_a_note_in_the_table():
    a, _ = build_report(load_stack("dev"), {"team-a": "not: [a kubeconfig"})
    assert a.allocated is None and a.note.startswith("not reachable: ") and "\n" not in a.note


def test_stack_outputs_that_cannot_be_read_are_one_line(monkeypatch, capsys):
    import components.reports.capacity_report as cr

    said = "cannot read the outputs of stack dev: no stack named 'dev' found"

    def no_outputs(_stack):
        raise RuntimeError(said)

    monkeypatch.setattr(cr, "stack_kubeconfigs", no_outputs)
    assert main(["--stack", "dev", "--live"]) == 2
    err = capsys.readouterr().err
    assert err == f"python -m components.reports.capacity_report: error: {said}\n"


def test_headroom_is_under_the_quota_and_free_is_on_the_fleet():
    """Quota 4 vGPU, 3 requested, on a fleet of 10: 1 vGPU of headroom, 7 free (not "7 remaining")."""
    from components.reports.capacity_report import TenantCapacity

    r = TenantCapacity("t", "1 x A100", Quota(10, 81920, 100), Quota(4, 40000, 60), Quota(3, 30000, 90), None)
    assert r.headroom == Quota(1, 10000, -30)  # over the quota's cores: negative, as it is
    assert r.free == Quota(7, 51920, 10)
    table = render_table([r])
    assert "1 vGPU / 10,000 MB / -30 %" in table and "7 vGPU / 51,920 MB / 10 %" in table
    assert "quota headroom" in table.splitlines()[0] and "fleet free" in table.splitlines()[0]
