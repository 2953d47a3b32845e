"""The Settings page's "Connect an agent": a token made for an agent, shown once inside the
commands that connect it."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from api.tokens import create_token
from mcp_server.connecting import connect_context


@require_POST
def agent_token(request: HttpRequest) -> HttpResponse:
    _record, token = create_token(user=request.user, name=_("Agent (MCP)"))
    return render(request, "mcp_server/connect.html", connect_context(request, token), status=201)
