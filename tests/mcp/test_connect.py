"""Settings, "Connect an agent": the exact command and configuration, and a token made for it."""

import json
import re
from html import unescape

import pytest

from api.models import ApiToken
from api.tokens import token_record

pytestmark = pytest.mark.django_db


def field(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*value="([^"]*)"', html) or re.search(
        rf'id="{element_id}"[^>]*>([^<]*)</textarea>', html, re.S
    )
    return unescape(found.group(1))


def test_settings_show_the_command_with_the_request_host(client, user):
    client.force_login(user)
    html = client.get("/settings/", headers={"host": "localhost"}).content.decode()
    assert "Connect an agent" in html
    assert field(html, "mcp-command") == (
        "claude mcp add --transport http parley http://localhost/mcp/ "
        '--header "Authorization: Bearer <token>"'
    )
    assert json.loads(field(html, "mcp-json")) == {
        "mcpServers": {
            "parley": {
                "type": "http",
                "url": "http://localhost/mcp/",
                "headers": {"Authorization": "Bearer <token>"},
            }
        }
    }


def test_public_url_wins_when_set(client, user, settings):
    settings.PUBLIC_URL, settings.PUBLIC_URL_CONFIGURED = "https://parley.example.org", True
    client.force_login(user)
    html = client.get("/settings/").content.decode()
    assert "parley https://parley.example.org/mcp/ --header" in field(html, "mcp-command")


def test_the_button_makes_a_token_shown_once_in_the_command(client, user):
    client.force_login(user)
    response = client.post("/settings/agents/token/")
    assert response.status_code == 201
    html = response.content.decode()
    token = re.search(r"Bearer (parley_[A-Za-z0-9_-]+)", field(html, "mcp-command")).group(1)
    assert token_record(token).user == user
    assert token in field(html, "mcp-json")
    assert ApiToken.objects.get(user=user).name == "Agent (MCP)"
    assert "will not be shown again" in html
    assert client.get("/settings/agents/token/").status_code == 405


def test_settings_show_the_hooks_of_each_cli(client, user):
    import tomllib

    client.force_login(user)
    html = client.get("/settings/", headers={"host": "localhost"}).content.decode()
    hooks = json.loads(field(html, "claude-hooks"))["hooks"]
    [permission] = hooks["PermissionRequest"]
    assert permission["matcher"] == "*"
    assert permission["hooks"] == [
        {
            "type": "http",
            "url": "http://localhost/hooks/claude-code/permission-request",
            "headers": {"Authorization": "Bearer $PARLEY_TOKEN"},
            "allowedEnvVars": ["PARLEY_TOKEN"],
            "timeout": 600,
        }
    ]
    assert hooks["Notification"][0]["hooks"][0]["url"] == (
        "http://localhost/hooks/claude-code/notification"
    )
    assert field(html, "token-export") == "export PARLEY_TOKEN=<token>"
    codex = tomllib.loads(field(html, "codex-hooks"))["hooks"]["PermissionRequest"][0]
    assert codex["matcher"] == "Bash"
    assert codex["hooks"][0]["type"] == "command"
    assert (
        "--data-binary @- http://localhost/hooks/codex/permission-request"
        in (codex["hooks"][0]["command"])
    )
    assert field(html, "codex-command") == (
        "codex mcp add parley --url http://localhost/mcp/ --bearer-token-env-var PARLEY_TOKEN"
    )


def test_the_agents_token_is_in_the_export_line(client, user):
    client.force_login(user)
    html = client.post("/settings/agents/token/").content.decode()
    token = re.search(r"Bearer (parley_[A-Za-z0-9_-]+)", field(html, "mcp-command")).group(1)
    assert field(html, "token-export") == f"export PARLEY_TOKEN={token}"
