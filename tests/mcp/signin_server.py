"""An MCP server that needs each user's own account, written with the `mcp` SDK's server auth
(its authorization server routes over an in-memory provider, its bearer check on /mcp): what
tests/mcp/test_signin.py has Parley's users connect to.

    python tests/mcp/signin_server.py --port N

It is its own authorization server at http://127.0.0.1:N (metadata, dynamic registration,
authorization code with PKCE, refresh tokens rotated, resource-bound tokens). /authorize sends
the person to /login, a form that asks which account they are ("Account"); GET
/login?pending=…&account=ana signs in as ana at once. Tools:
- `whoami()` (read-only): the account the call's token belongs to.
- `write_item(text)`: "<account> wrote <text>".

For the tests: POST /expire?account=ana ends ana's access tokens (their refresh tokens still
work); POST /drop?account=ana ends all of ana's tokens; GET /stats counts the grants made
(`authorization_code`, `refresh_token`), the registrations and the tokens revoked at /revoke
(RFC 7009, as a client revokes), as JSON.
"""

import argparse
import html
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp_types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

SCOPE = "tracker"


@dataclass
class Memory:
    """The authorization server's state: clients, requests waiting for a login, codes, tokens."""

    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    waiting: dict[str, tuple[str, AuthorizationParams]] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    stats: dict[str, int] = field(
        default_factory=lambda: {
            "authorization_code": 0,
            "refresh_token": 0,
            "registered": 0,
            "revoked": 0,
        }
    )


class Provider:
    """The SDK's OAuthAuthorizationServerProvider, in memory."""

    def __init__(self, base: str, token_seconds: int) -> None:
        self.base = base
        self.token_seconds = token_seconds
        self.memory = Memory()

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.memory.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.memory.clients[client_info.client_id] = client_info
        self.memory.stats["registered"] += 1

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        pending = secrets.token_urlsafe(16)
        self.memory.waiting[pending] = (client.client_id, params)
        return f"{self.base}/login?{urlencode({'pending': pending})}"

    def signed_in(self, pending: str, account: str) -> str:
        """The person at /login is `account`: a code, and where it goes."""
        client_id, params = self.memory.waiting.pop(pending)
        code = secrets.token_urlsafe(32)
        self.memory.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=account,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code: str):
        return self.memory.codes.get(authorization_code)

    async def exchange_authorization_code(self, client, authorization_code) -> OAuthToken:
        self.memory.codes.pop(authorization_code.code, None)
        self.memory.stats["authorization_code"] += 1
        return self._tokens(client.client_id, authorization_code)

    async def load_refresh_token(self, client, refresh_token: str):
        found = self.memory.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(self, client, refresh_token, scopes) -> OAuthToken:
        if self.memory.refresh.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "the refresh token was used already")
        self.memory.stats["refresh_token"] += 1
        return self._tokens(client.client_id, refresh_token)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.memory.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token) -> None:
        self.memory.access.pop(token.token, None)
        self.memory.refresh.pop(token.token, None)
        self.memory.stats["revoked"] += 1

    def _tokens(self, client_id: str, grant) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        expires = int(time.time()) + self.token_seconds
        common = {"client_id": client_id, "scopes": grant.scopes, "resource": grant.resource}
        self.memory.access[access] = AccessToken(
            token=access, expires_at=expires, subject=grant.subject, **common
        )
        self.memory.refresh[refresh] = RefreshToken(token=refresh, subject=grant.subject, **common)
        return OAuthToken(
            access_token=access,
            refresh_token=refresh,
            expires_in=self.token_seconds,
            scope=" ".join(grant.scopes),
        )

    def drop(self, account: str, *, refresh_too: bool) -> None:
        for tokens in (
            [self.memory.access, self.memory.refresh] if refresh_too else [self.memory.access]
        ):
            for key in [k for k, v in tokens.items() if v.subject == account]:
                del tokens[key]


def build(port: int, token_seconds: int) -> MCPServer:
    base = f"http://127.0.0.1:{port}"
    provider = Provider(base, token_seconds)
    server = MCPServer(
        "tracker",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=base,
            resource_server_url=f"{base}/mcp",
            validate_token_resource=True,
            required_scopes=[SCOPE],
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
            revocation_options=RevocationOptions(enabled=True),
        ),
    )

    def account() -> str:
        token = get_access_token()
        return token.subject if token is not None and token.subject else "nobody"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), structured_output=False)
    def whoami() -> str:
        """Who you are on the tracker."""
        return account()

    @server.tool(structured_output=False)
    def write_item(text: str) -> str:
        """Write an item on the tracker."""
        return f"{account()} wrote {text}"

    @server.custom_route("/login", methods=["GET"])
    async def login(request: Request) -> Response:
        pending = request.query_params.get("pending", "")
        if pending not in provider.memory.waiting:
            return HTMLResponse("<p>This sign-in is not waiting.</p>", status_code=400)
        if name := request.query_params.get("account"):
            return RedirectResponse(provider.signed_in(pending, name), status_code=302)
        return HTMLResponse(
            "<!doctype html><title>Tracker sign-in</title><form method=get>"
            f"<input type=hidden name=pending value='{html.escape(pending)}'>"
            "<label>Account <input name=account></label><button>Sign in</button></form>"
        )

    @server.custom_route("/expire", methods=["POST"])
    async def expire(request: Request) -> Response:
        provider.drop(request.query_params["account"], refresh_too=False)
        return JSONResponse({"ok": True})

    @server.custom_route("/drop", methods=["POST"])
    async def drop(request: Request) -> Response:
        provider.drop(request.query_params["account"], refresh_too=True)
        return JSONResponse({"ok": True})

    @server.custom_route("/stats", methods=["GET"])
    async def stats(request: Request) -> Response:
        return JSONResponse(provider.memory.stats)

    return server


class PublicClientRevocation:
    """ASGI middleware: the SDK's revocation handler (mcp 2.3.0) refuses a request without a
    `client_secret` field, which RFC 7009 does not ask of a public client (it authenticates
    with none); such a request gets an empty one, which the handler then ignores."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] != "/revoke":
            return await self.app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        if b"client_secret=" not in body:
            body += b"&client_secret="
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)


def main() -> None:
    parser = argparse.ArgumentParser(description="An MCP server with per-user OAuth (tests).")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token-seconds", type=int, default=3600)
    args = parser.parse_args()
    app = build(args.port, args.token_seconds).streamable_http_app(streamable_http_path="/mcp")
    uvicorn.run(PublicClientRevocation(app), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
