"""A hosted MCP client signing in to Parley with OAuth, end to end: the SDK's own
OAuthClientProvider against a real daphne (discovery from the 401, dynamic registration,
PKCE, the consent page submitted by the signed-in user, the token, the refresh), then MCP
calls with the token, and revoking the client in Settings ending its waiting call and its
tokens."""

import asyncio
import html
import re
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2
import pytest
from django.contrib.auth.hashers import make_password
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from tests.live_clients import log_in
from tests.mcp.conftest import execute

pytestmark = pytest.mark.live

PASSWORD = "correct horse battery staple"
CALLBACK = "http://127.0.0.1:9/callback"
ASK = {
    "questions": [
        {"question": "Ship it?", "header": "Ship", "options": [{"label": "Yes"}, {"label": "No"}]}
    ]
}


class Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info) -> None:
        self.client_info = client_info


def hidden_fields(page: str) -> dict[str, str]:
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page)
    return {name: html.unescape(value) for name, value in fields}


class User:
    """The person at the browser: signed in to Parley, allowing the client on the consent
    page and handing the redirect's code back to the client."""

    def __init__(self, browser: httpx.AsyncClient) -> None:
        self.browser = browser
        self.redirect: asyncio.Future = asyncio.get_running_loop().create_future()
        self.consent_page = ""

    async def open(self, authorization_url: str) -> None:
        page = await self.browser.get(authorization_url)
        assert page.status_code == 200, page.text
        self.consent_page = page.text
        response = await self.browser.post(
            "/oauth/authorize/", data={**hidden_fields(page.text), "allow": "on"}
        )
        assert response.status_code == 302, response.text
        self.redirect.set_result(response.headers["location"])

    async def come_back(self) -> AuthorizationCodeResult:
        location = await self.redirect
        assert location.startswith(CALLBACK)
        query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )


async def revoke_in_settings(browser: httpx.AsyncClient, name: str) -> None:
    page = (await browser.get("/settings/apps/")).text
    assert name in page
    action = re.search(r'<form method="post" action="(/settings/apps/\d+/revoke/)"', page)[1]
    csrf = hidden_fields(page)["csrfmiddlewaretoken"]
    response = await browser.post(action, data={"csrfmiddlewaretoken": csrf})
    assert response.status_code == 302


async def test_a_hosted_client_signs_in_with_oauth_asks_and_is_revoked(mcp_live, account):
    execute(
        mcp_live,
        "UPDATE auth_user SET password = %s WHERE id = %s",
        make_password(PASSWORD, hasher="pbkdf2_sha256"),
        account.user_id,
    )
    storage = Memory()
    async with httpx.AsyncClient(base_url=mcp_live.url, timeout=30) as browser:
        await log_in(browser, account.username, PASSWORD)
        user = User(browser)
        provider = OAuthClientProvider(
            server_url=f"{mcp_live.url}/mcp/",
            client_metadata=OAuthClientMetadata(
                client_name="Live assistant",
                redirect_uris=[CALLBACK],
                token_endpoint_auth_method="none",
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
            ),
            storage=storage,
            redirect_handler=user.open,
            callback_handler=user.come_back,
        )
        async with (
            httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30, read=60)) as http,
            streamable_http_client(f"{mcp_live.url}/mcp/", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            assert "ask_user_question" in tools
            assert "Let Live assistant use Parley?" in user.consent_page
            assert "127.0.0.1:9" in user.consent_page
            first = storage.tokens

            waiting = asyncio.create_task(session.call_tool("ask_user_question", ASK))
            await asyncio.sleep(1)
            assert not waiting.done()
            await revoke_in_settings(browser, "Live assistant")
            ended = await asyncio.wait_for(waiting, 15)
            assert ended.is_error
            assert "the token was revoked" in ended.content[0].text

    async with httpx.AsyncClient(base_url=mcp_live.url, timeout=30) as plain:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        refused = await plain.post(
            "/mcp/", json=body, headers={"Authorization": f"Bearer {first.access_token}"}
        )
        assert refused.status_code == 401
        assert "resource_metadata=" in refused.headers["www-authenticate"]
        refresh = await plain.post(
            "/oauth/token/",
            data={
                "grant_type": "refresh_token",
                "refresh_token": first.refresh_token,
                "client_id": storage.client_info.client_id,
            },
        )
        assert refresh.status_code == 400
