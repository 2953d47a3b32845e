import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

pytestmark = pytest.mark.django_db  # `check` also inspects the database


def test_an_unknown_agent_provider_stops_the_server_from_starting(settings):
    settings.AGENT_PROVIDER = "nonsense"
    with pytest.raises(SystemCheckError, match="AGENT_PROVIDER='nonsense' is not available"):
        call_command("check")


def test_the_default_configuration_passes_the_checks(capsys):
    call_command("check")
    assert "no issues" in capsys.readouterr().out
