"""/settings/tools/: the operator's MCP servers (connected, or why not), their tools with the
policy each has for this user, and the user's "Always allow"s, each revocable."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from mcp_client import status
from mcp_client.config import ALLOW, ASK, DENY, load
from mcp_client.tools import exposed_name
from questions import approvals


@require_GET
def tools_page(request: HttpRequest) -> HttpResponse:
    allowed = set()
    servers = status.servers()
    listed = set()
    for server in servers:
        for tool in server["tools"]:
            tool["exposed"] = exposed_name(server["name"], tool["name"])
            listed.add(tool["exposed"])
            policy = server["config"].policy(tool["name"]) or (ALLOW if tool["readOnly"] else ASK)
            tool["policy"] = policy
            tool["always"] = policy == ASK and tool["exposed"] in allowed
    config = load()
    context = {
        "servers": servers,
        "config_error": config.error,
        "invalid": config.invalid,
        # Allowed tools no server lists now (a server is down, or dropped the tool).
        "unlisted": sorted(allowed - listed),
        "policies": {"allow": ALLOW, "ask": ASK, "deny": DENY},
    }
    return render(request, "mcp_client/tools.html", context)


@require_POST
def revoke(request: HttpRequest) -> HttpResponse:
    approvals.revoke_permission(user=request.user, tool=request.POST.get("tool", ""))
    return redirect("mcp_client:tools")
