"""The record a platform publishes for a team, read back as a team stack reads it: one place for
its keys (Kubernetes' camelCase in the ConfigMap), and a record the stack cannot use said in one
line naming what it lacks."""

import pytest

from components.kube.platform_record import PlatformRecord, PlatformUnreadable
from tests.support.team_grant import record

RECORD = record("team-a", 31443, 31132)


def test_a_record_reads_back_as_it_was_written():
    data = RECORD.data()
    assert data["apiPort"] == "31443" and data["konnectivityPort"] == "31132" and data["mirror"] == ""
    assert all(isinstance(v, str) for v in data.values())  # a ConfigMap holds strings
    assert PlatformRecord.from_data(data, "here") == RECORD


def test_a_record_of_an_older_platform_names_what_it_lacks():
    data = {k: v for k, v in RECORD.data().items() if k not in ("datastore", "mirror")}
    with pytest.raises(PlatformUnreadable) as err:
        PlatformRecord.from_data(data, "ConfigMap x")
    said = str(err.value)
    assert said.startswith("ConfigMap x lacks datastore:") and "`pulumi up` on the platform stack" in said
    assert "\n" not in said


def test_a_port_that_is_not_one_is_named():
    with pytest.raises(PlatformUnreadable, match="apiPort is 'x', not a port"):
        PlatformRecord.from_data({**RECORD.data(), "apiPort": "x"}, "ConfigMap x")
