"""Servers that need each user's own account (`"auth": "oauth"` in MCP_CONFIG): people connect
them on /settings/tools/ through the server's own OAuth sign-in, and their turns call the tools
with their own tokens only.

The live tests run tests/mcp/signin_server.py, an MCP server with the `mcp` SDK's server auth
(its own authorization server in memory), on a port of its own; Parley's pages are driven with
Django's test client, the server's sign-in page with httpx, as a browser follows redirects.
The calls run on this test's event loop as a turn runs them; their token reads happen on other
threads (a refresh must not hold up the process's database thread), so those tests commit."""

import asyncio
import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import httpx2
import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse
from django.utils import timezone

from chat import services
from chat.blocks import ToolCallBlock
from chat.engine import tools
from chat.engine.tools import ToolContext
from chat.engine.turns import Lease
from core.sealed import Unreadable, seal, unseal
from mcp_client import config, signin
from mcp_client import tools as mcp_tools
from mcp_client.config import parse
from mcp_client.models import SignIn
from mcp_client.tools import McpTool
from tests.mcp.tracker import Tracker

# --- Helpers -----------------------------------------------------------------------------------


@pytest.fixture
def use_servers(settings, tmp_path):
    """`use_servers(servers)`: MCP_CONFIG is a file naming `servers` (mcpServers), read afresh."""

    def use(servers: dict) -> None:
        path = tmp_path / "mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}))
        settings.MCP_CONFIG = str(path)
        config.load.cache_clear()

    yield use
    config.load.cache_clear()


@pytest.fixture
def tracker(tmp_path, settings):
    """The sign-in server, named "tracker" in MCP_CONFIG with its tools allowed."""
    server = Tracker(tmp_path / "tracker.log")
    settings.MCP_CONFIG = str(server.config(tmp_path))
    config.load.cache_clear()
    yield server
    config.load.cache_clear()
    server.stop()


def connect(client, account: str) -> str:
    """Press Connect beside tracker as `client`'s user and sign in there as `account`; the
    text of the Tools page Parley shows after."""
    started = client.post(reverse("mcp_client:connect", args=["tracker"]))
    assert started.status_code == 302, started.content
    at = started["Location"]
    with httpx.Client(follow_redirects=False) as browser:
        while not at.startswith("http://testserver/"):
            response = browser.get(at)
            assert response.status_code == 302, response.text
            at = response.headers["location"]
            if "/login?" in at:
                at += f"&account={account}"
    back = urlsplit(at)
    return client.get(f"{back.path}?{back.query}", follow=True).content.decode()


def call(user, tool: str, arguments: dict, call_id: str):
    """A turn that `user` started calls tracker's `tool`: its result as the model reads it."""
    conversation = services.create_conversation(owner=user, title="Tracker")
    conversation.turn_started_by = user
    conversation.save(update_fields=["turn_started_by"])
    context = ToolContext(lease=Lease(conversation_id=conversation.pk, token=1))
    block = ToolCallBlock(id=call_id, name=f"mcp__tracker__{tool}", arguments=arguments)

    async def run():
        try:
            await mcp_tools.connect()
            return await tools.run(block, context)
        finally:
            here = mcp_tools._connections.pop(asyncio.get_running_loop(), None)
            if here is not None:
                await here.close()
            for registered in tools.registry:
                if isinstance(registered, McpTool):
                    tools.unregister(registered.name)

    return async_to_sync(run)()


# --- Live: connecting, and calls with each one's own token --------------------------------------


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_two_people_connect_their_own_accounts_and_the_server_sees_each_one(
    tracker, client, django_user_model
):
    ana = django_user_model.objects.create_user("ana", password="x")
    bruno = django_user_model.objects.create_user("bruno", password="x")

    client.force_login(ana)
    before = client.get(reverse("mcp_client:tools")).content.decode()
    assert "Connect to use: this server works with each person’s own account." in before
    page = connect(client, "ana-on-tracker")
    assert "Connected to tracker." in page
    assert "Connected with your account since" in page
    assert "Disconnect" in page
    client.force_login(bruno)
    connect(client, "bruno-on-tracker")

    assert call(ana, "whoami", {}, "c1").content == "ana-on-tracker"
    written = call(bruno, "write_item", {"text": "a bug"}, "c2")
    assert (written.content, written.is_error) == ("bruno-on-tracker wrote a bug", False)
    assert tracker.stats()["authorization_code"] == 2

    # Kept sealed: the row holds no token in the clear, and opens to the tokens that work.
    sign_in = SignIn.objects.get(user=ana, server="tracker")
    opened = unseal(sign_in.sealed)
    assert opened["tokens"]["access_token"] not in sign_in.sealed
    assert {tool["name"] for tool in sign_in.tools} == {"whoami", "write_item"}


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_someone_who_has_not_connected_is_told_to_connect_and_nothing_runs(
    tracker, client, django_user_model
):
    ana = django_user_model.objects.create_user("ana", password="x")
    carol = django_user_model.objects.create_user("carol", password="x")
    client.force_login(ana)
    connect(client, "ana-on-tracker")

    client.force_login(carol)
    page = client.get(reverse("mcp_client:tools")).content.decode()
    assert "Connect to use: this server works with each person’s own account." in page
    assert len(re.findall(r"<td>\s*Connect to use\s*</td>", page)) == 2  # each tool
    result = call(carol, "write_item", {"text": "x"}, "c1")
    assert result.is_error
    assert result.content == (
        "Not run: tracker needs the user's own account, and they have not connected it. Tell "
        "them to open Settings, Tools, and choose Connect beside tracker; then try again."
    )
    assert tracker.stats()["authorization_code"] == 1


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_an_expired_token_is_refreshed_and_a_refused_one_is_refreshed_and_sent_again(
    tracker, client, django_user_model
):
    ana = django_user_model.objects.create_user("ana", password="x")
    client.force_login(ana)
    connect(client, "ana")

    SignIn.objects.filter(user=ana).update(expires_at=timezone.now())
    assert call(ana, "whoami", {}, "c1").content == "ana"
    assert tracker.stats()["refresh_token"] == 1
    sign_in = SignIn.objects.get(user=ana)
    assert sign_in.expires_at > timezone.now() + signin.REFRESH_MARGIN
    assert sign_in.refreshed_at is not None

    # The server ends the access token before it expires: a 401, one refresh, the call again.
    tracker.post("expire", "ana")
    assert call(ana, "write_item", {"text": "once"}, "c2").content == "ana wrote once"
    assert tracker.stats()["refresh_token"] == 2


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_revoked_sign_in_stops_the_tools_until_the_person_connects_again(
    tracker, client, django_user_model
):
    ana = django_user_model.objects.create_user("ana", password="x")
    client.force_login(ana)
    connect(client, "ana")

    tracker.post("drop", "ana")
    refused = call(ana, "write_item", {"text": "x"}, "c1")
    assert refused.is_error
    assert refused.content == (
        "Not run: tracker no longer accepts the user's sign-in (Your sign-in expired and could "
        "not be renewed.). Tell them to open Settings, Tools, and choose Connect again beside "
        "tracker; then try again."
    )
    page = client.get(reverse("mcp_client:tools")).content.decode()
    assert "Connect again: Your sign-in expired and could not be renewed." in page

    page = connect(client, "ana")
    assert call(ana, "whoami", {}, "c2").content == "ana"

    # Disconnect: the tokens are revoked at the server, the row goes, and the tools need a
    # Connect again.
    done = client.post(reverse("mcp_client:disconnect", args=["tracker"]), follow=True)
    assert "Disconnected from tracker." in done.content.decode()
    assert not SignIn.objects.filter(user=ana).exists()
    assert tracker.stats()["revoked"] == 2  # the refresh token and the access token
    assert "have not connected it" in call(ana, "whoami", {}, "c3").content


# --- In process ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_callback_parley_did_not_start_is_refused(client, user):
    client.force_login(user)
    response = client.get(
        reverse("mcp_client:signed_in"), {"code": "stolen", "state": "guessed"}, follow=True
    )
    assert (
        "This sign-in is not one you started here, or it was used already. Connect again."
        in response.content.decode()
    )
    assert not SignIn.objects.exists()


@pytest.mark.django_db
def test_connect_is_only_for_a_server_that_asks_each_user_to_sign_in(client, user, use_servers):
    use_servers({"search": {"url": "https://example.org/mcp"}})
    client.force_login(user)
    assert client.post(reverse("mcp_client:connect", args=["search"])).status_code == 404
    assert client.post(reverse("mcp_client:connect", args=["nothing"])).status_code == 404
    assert client.get(reverse("mcp_client:connect", args=["search"])).status_code == 405


def test_an_oauth_entry_is_checked_like_every_other():
    checked = parse(
        json.dumps(
            {
                "mcpServers": {
                    "ok": {"url": "https://a.example/mcp", "auth": "oauth"},
                    "secret": {"url": "https://b.example/mcp", "oauth": {"clientId": "x"}},
                    "header": {
                        "url": "https://c.example/mcp",
                        "auth": "oauth",
                        "headers": {"Authorization": "Bearer operator"},
                    },
                    "orphan": {
                        "url": "https://d.example/mcp",
                        "auth": "oauth",
                        "oauth": {"clientSecret": "s"},
                    },
                    "stdio": {"command": "x", "auth": "oauth"},
                }
            }
        )
    )
    assert [s.name for s in checked.servers] == ["ok"]
    assert checked.servers[0].per_user
    assert 'only for a server with "auth": "oauth"' in checked.invalid["secret"]
    assert "each user's own token is the Authorization" in checked.invalid["header"]
    assert "clientSecret needs the clientId" in checked.invalid["orphan"]
    assert "auth" in checked.invalid["stdio"]


def test_sealed_secrets_open_under_a_fallback_key_and_not_under_another(settings):
    settings.SECRET_KEY = "first-key-" + "x" * 50
    sealed = seal({"access_token": "abc"})
    assert "abc" not in sealed
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = (
        "second-key-" + "y" * 50,
        ["first-key-" + "x" * 50],
    )
    assert unseal(sealed) == {"access_token": "abc"}
    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(Unreadable):
        unseal(sealed)


@pytest.mark.django_db(transaction=True)
def test_a_server_asking_for_more_scope_marks_the_sign_in_to_connect_again(
    user, client, unreachable
):
    """A 403 `insufficient_scope` is not refreshed away: the person must grant more."""
    SignIn.objects.create(
        user=user,
        server="tracker",
        sealed=seal({"client": {"client_id": "c"}, "tokens": {"access_token": "t"}}),
        token_endpoint="https://tracker.example/token",
    )
    bearer = signin.Bearer(user.pk, "tracker")

    def server(request: httpx2.Request) -> httpx2.Response:
        assert request.headers["Authorization"] == "Bearer t"
        challenge = 'Bearer error="insufficient_scope", scope="tracker admin"'
        return httpx2.Response(403, headers={"WWW-Authenticate": challenge})

    async def request() -> int:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(server), auth=bearer) as http:
            return (await http.post("https://tracker.example/mcp")).status_code

    assert async_to_sync(request)() == 403
    assert bearer.refused == signin.MORE_SCOPE
    assert SignIn.objects.get(user=user).problem == signin.MORE_SCOPE
    client.force_login(user)
    page = client.get(reverse("mcp_client:tools"), headers={"Accept-Language": "pt-BR"})
    assert "O servidor precisa de mais acesso do que você concedeu." in page.content.decode()


@pytest.fixture
def unreachable(use_servers):
    """MCP_CONFIG naming "tracker", a per-user server on a port where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    use_servers({"tracker": {"url": f"http://127.0.0.1:{port}/mcp", "auth": "oauth"}})


@pytest.mark.django_db
def test_connect_to_a_server_that_cannot_be_reached_says_so_and_keeps_nothing(
    client, user, unreachable
):
    client.force_login(user)
    response = client.post(reverse("mcp_client:connect", args=["tracker"]), follow=True)
    page = response.content.decode()
    assert response.redirect_chain == [(reverse("mcp_client:tools"), 302)]
    assert "The server’s sign-in could not be found:" in page
    assert not SignIn.objects.exists()


@pytest.mark.django_db
def test_a_person_who_denies_at_the_server_is_told_and_nothing_is_kept(client, user, unreachable):
    client.force_login(user)
    session = client.session
    session["mcp_client.sign_ins"] = {"s1": {"server": "tracker", "state": "s1", "until": 9e12}}
    session.save()
    response = client.get(
        reverse("mcp_client:signed_in"),
        {"state": "s1", "error": "access_denied", "error_description": "<b>No</b> thanks"},
        follow=True,
    )
    page = response.content.decode()
    assert "tracker did not connect: &lt;b&gt;No&lt;/b&gt; thanks" in page
    assert not SignIn.objects.exists()
    # The flow is used up: the same answer again is not one Parley started.
    again = client.get(reverse("mcp_client:signed_in"), {"state": "s1", "code": "c"}, follow=True)
    assert "This sign-in is not one you started here" in again.content.decode()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_operators_own_client_signs_in_with_its_secret_and_registers_nothing(
    tracker, client, django_user_model, use_servers
):
    registered = httpx.post(
        f"{tracker.base}/register",
        json={
            "client_name": "Parley (operator)",
            "redirect_uris": ["http://testserver/settings/tools/signed-in/"],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "client_secret_basic",
        },
    ).json()
    entry = {
        "url": f"{tracker.base}/mcp",
        "auth": "oauth",
        "oauth": {"clientId": registered["client_id"], "clientSecret": registered["client_secret"]},
        "approval": {"default": "allow"},
    }
    use_servers({"tracker": entry})
    ana = django_user_model.objects.create_user("ana", password="x")
    client.force_login(ana)

    assert "Connected to tracker." in connect(client, "ana")
    SignIn.objects.filter(user=ana).update(expires_at=timezone.now())  # refreshed with it too
    assert call(ana, "whoami", {}, "c1").content == "ana"
    assert tracker.stats() == {
        "authorization_code": 1,
        "refresh_token": 1,
        "registered": 1,  # the operator's, above
        "revoked": 0,
    }


@pytest.fixture
def impostor(use_servers):
    """MCP_CONFIG naming "tracker", a server whose resource metadata names another resource."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            metadata = f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer resource_metadata="{metadata}"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            body = json.dumps(
                {
                    "resource": "https://elsewhere.example/mcp",
                    "authorization_servers": [f"http://127.0.0.1:{port}"],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    use_servers({"tracker": {"url": f"http://127.0.0.1:{port}/mcp", "auth": "oauth"}})
    yield
    server.shutdown()
    server.server_close()


@pytest.mark.django_db
def test_a_server_whose_metadata_names_another_resource_is_not_signed_in_to(client, user, impostor):
    client.force_login(user)
    page = client.post(reverse("mcp_client:connect", args=["tracker"]), follow=True)
    assert "the metadata is for https://elsewhere.example/mcp" in page.content.decode()
    assert not SignIn.objects.exists()
