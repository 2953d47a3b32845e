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


# The environment variable the hook snippets read the token from (never written into them).
TOKEN_VARIABLE = "PARLEY_TOKEN"  # noqa: S105 (a variable's name, not a token)
# The hooks' timeout in the snippets, in seconds: AGENT_HOOK_WAIT stays a little under it.
HOOK_TIMEOUT = 600


def base_url(request: HttpRequest) -> str:
    """Parley's address as agents reach it: PUBLIC_URL when set, else this request's."""
    if settings.PUBLIC_URL_CONFIGURED:
        return settings.PUBLIC_URL.rstrip("/")
    return request.build_absolute_uri("/").rstrip("/")


def claude_code_hooks(base: str) -> dict:
    """Claude Code's `hooks` block for ~/.claude/settings.json: every permission prompt and
    notification posted to Parley (`http` hooks), the token read from TOKEN_VARIABLE."""

    def hook(path: str, timeout: int) -> dict:
        return {
            "type": "http",
            "url": f"{base}{path}",
            "headers": {"Authorization": f"Bearer ${TOKEN_VARIABLE}"},
            "allowedEnvVars": [TOKEN_VARIABLE],
            "timeout": timeout,
        }

    return {
        "hooks": {
            "PermissionRequest": [
                {
                    "matcher": "*",
                    "hooks": [hook("/hooks/claude-code/permission-request", HOOK_TIMEOUT)],
                }
            ],
            "Notification": [
                {"matcher": "", "hooks": [hook("/hooks/claude-code/notification", 30)]}
            ],
        }
    }


def codex_hooks(base: str) -> str:
    """Codex's config.toml hook: Codex has command hooks only, so curl forwards the hook's
    stdin to Parley and prints Parley's answer (a failure prints nothing: Codex asks).

    Codex starts a hook in a process session of its own and leaves it running when Codex
    itself ends, so the shell around curl watches Codex (its parent) and stops curl once Codex
    is gone: Parley then ends the approval at once instead of at AGENT_HOOK_WAIT. A background
    command's stdin is /dev/null in sh, hence the hook's stdin kept as fd 3."""
    url = f"{base}/hooks/codex/permission-request"
    command = (
        f"exec 3<&0; curl -fsS --max-time {HOOK_TIMEOUT} "
        f'-H "Authorization: Bearer ${TOKEN_VARIABLE}" '
        f"-H 'Content-Type: application/json' --data-binary @- {url} <&3 & c=$!; "
        "while kill -0 $c 2>/dev/null; do kill -0 $PPID 2>/dev/null || kill $c; sleep 1; done; "
        "wait $c"
    )
    quoted = command.replace("\\", "\\\\").replace('"', '\\"')
    return (
        "[[hooks.PermissionRequest]]\n"
        'matcher = "Bash"\n\n'
        "[[hooks.PermissionRequest.hooks]]\n"
        'type = "command"\n'
        f'command = "{quoted}"\n'
        f"timeout = {HOOK_TIMEOUT}\n"
    )


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
        "token_variable": TOKEN_VARIABLE,
        "token_export": f"export {TOKEN_VARIABLE}={token or TOKEN_PLACEHOLDER}",
        "claude_hooks_json": json.dumps(claude_code_hooks(base_url(request)), indent=2),
        "codex_hooks_toml": codex_hooks(base_url(request)),
        "codex_command": f"codex mcp add {SERVER_NAME} --url {url} "
        f"--bearer-token-env-var {TOKEN_VARIABLE}",
    }
