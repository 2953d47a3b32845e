"""How an agent connects: the endpoint's address and what to paste into a client."""

import json

from django.conf import settings
from django.http import HttpRequest

# What the Settings page shows until a token is made.
TOKEN_PLACEHOLDER = "<token>"  # noqa: S105 (shown in place of a token)
SERVER_NAME = "parley"


def endpoint_url(request: HttpRequest) -> str:
    """The MCP endpoint as agents reach it: under PUBLIC_URL when it is set, else at the
    address this request came to."""
    if settings.PUBLIC_URL_CONFIGURED:
        return f"{settings.PUBLIC_URL}/mcp/"
    return request.build_absolute_uri("/mcp/")


def connect_context(request: HttpRequest, token: str = "") -> dict:
    """The Claude Code command and the mcpServers JSON for other clients, with `token` (or
    the placeholder)."""
    url = endpoint_url(request)
    header = f"Bearer {token or TOKEN_PLACEHOLDER}"
    servers = {
        "mcpServers": {
            SERVER_NAME: {"type": "http", "url": url, "headers": {"Authorization": header}}
        }
    }
    return {
        "mcp_url": url,
        "mcp_token": token,
        "claude_command": f"claude mcp add --transport http {SERVER_NAME} {url} "
        f'--header "Authorization: {header}"',
        "mcp_servers_json": json.dumps(servers, indent=2),
    }
