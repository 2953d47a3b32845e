"""Parley as the OAuth 2.1 authorization server of its /mcp/, in process: the metadata, the
401 that points to it, registration, the consent page, PKCE (S256 only), tokens bound to this
server's /mcp/, refresh-token rotation and revoking a client in Settings."""

import base64
import hashlib
import json
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from django.urls import reverse

from mcp_server.asgi import McpEndpoint
from mcp_server.auth import McpTokens
from mcp_server.oauth import access_for, grant_still_valid

BASE = "http://testserver"
RESOURCE = f"{BASE}/mcp/"
REDIRECT = "https://assistant.example/oauth/callback"


def challenge(verifier: str) -> str:
    return (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )


@pytest.fixture
def client_id(client, db) -> str:
    response = client.post(
        "/oauth/register/",
        json.dumps(
            {
                "client_name": "Assistant",
                "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
            }
        ),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return response.json()["client_id"]


def authorize_url(client_id: str, verifier: str, **overrides) -> str:
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "s1",
        "code_challenge": challenge(verifier),
        "code_challenge_method": "S256",
        "resource": RESOURCE,
        **overrides,
    }
    return "/oauth/authorize/?" + urlencode({k: v for k, v in params.items() if v is not None})


def allow(client, client_id: str, verifier: str, **overrides) -> str:
    """The signed-in user allows the client: the code it is sent back with."""
    page = client.get(authorize_url(client_id, verifier, **overrides))
    assert page.status_code == 200, page.content
    form = {k: v for k, v in page.context["form"].initial.items() if v}
    response = client.post("/oauth/authorize/", {**form, "allow": "on"})
    assert response.status_code == 302
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["state"] == ["s1"]
    return query["code"][0]


def token(client, **data) -> dict:
    response = client.post("/oauth/token/", data)
    # The toolkit sends some refusals' JSON as text/html.
    return {"status": response.status_code, **json.loads(response.content)}


def exchange(client, client_id: str, code: str, verifier: str | None, **overrides) -> dict:
    """The client trades `code` for tokens at the token endpoint (a None leaves a field out):
    its answer, with the status."""
    fields = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "client_id": client_id,
        "code_verifier": verifier,
        "resource": RESOURCE,
        **overrides,
    }
    return token(client, **{name: value for name, value in fields.items() if value is not None})


def tokens_for(client, client_id: str) -> dict:
    verifier = secrets.token_urlsafe(48)
    granted = exchange(client, client_id, allow(client, client_id, verifier), verifier)
    assert granted["status"] == 200, granted
    return granted


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def test_protected_resource_metadata_names_mcp_and_this_server(client):
    for path in (
        "/.well-known/oauth-protected-resource/mcp/",
        "/.well-known/oauth-protected-resource",
    ):
        document = client.get(path).json()
        assert document["resource"] == RESOURCE
        assert document["authorization_servers"] == [BASE]
        assert document["scopes_supported"] == ["mcp"]


def test_authorization_server_metadata_offers_code_with_s256_and_registration(client):
    document = client.get("/.well-known/oauth-authorization-server").json()
    assert document["issuer"] == BASE
    assert document["authorization_endpoint"] == f"{BASE}/oauth/authorize/"
    assert document["token_endpoint"] == f"{BASE}/oauth/token/"
    assert document["registration_endpoint"] == f"{BASE}/oauth/register/"
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert document["response_types_supported"] == ["code"]
    assert set(document["grant_types_supported"]) == {"authorization_code", "refresh_token"}
    assert document["client_id_metadata_document_supported"] is True


@pytest.mark.django_db(transaction=True)
async def test_mcp_without_a_valid_token_is_401_naming_the_resource_metadata():
    transport = httpx2.ASGITransport(app=McpEndpoint())
    async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as http:
        for headers in ({}, {"Authorization": "Bearer not-a-token"}):
            response = await http.post("/mcp/", json={}, headers=headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"].startswith("Bearer ")
            assert (
                'resource_metadata="http://localhost/.well-known/oauth-protected-resource/mcp/"'
                in response.headers["www-authenticate"]
            )


def test_the_consent_page_asks_after_parley_login(client, client_id):
    response = client.get(authorize_url(client_id, "v" * 50))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_consent_page_names_the_client_its_redirect_host_and_what_it_may_do(
    signed_in, client_id
):
    page = signed_in.get(authorize_url(client_id, "v" * 50)).content.decode()
    assert "Let Assistant use Parley?" in page
    assert "assistant.example" in page
    assert "may ask you questions and ask for your approval; nothing else" in page
    assert ">Allow</button>" in page and ">Deny</button>" in page


def test_deny_sends_the_client_back_with_access_denied(signed_in, client_id):
    page = signed_in.get(authorize_url(client_id, "v" * 50))
    form = dict(page.context["form"].initial)
    response = signed_in.post("/oauth/authorize/", {k: v for k, v in form.items() if v})
    assert response.status_code == 302
    assert parse_qs(urlsplit(response["Location"]).query)["error"] == ["access_denied"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"code_challenge": None, "code_challenge_method": None},
        {"code_challenge_method": "plain"},
        {"code_challenge_method": None},
    ],
    ids=["no PKCE", "plain", "no method (plain)"],
)
def test_an_authorization_without_s256_pkce_is_refused(signed_in, client_id, overrides):
    response = signed_in.get(authorize_url(client_id, "v" * 50, **overrides))
    assert response.status_code == 400
    assert "PKCE with S256" in response.content.decode()


def test_a_plain_challenge_slipped_into_the_consent_form_is_refused(signed_in, client_id):
    page = signed_in.get(authorize_url(client_id, "v" * 50))
    form = {
        **page.context["form"].initial,
        "code_challenge": "v" * 50,
        "code_challenge_method": "plain",
        "allow": "on",
    }
    response = signed_in.post("/oauth/authorize/", {k: v for k, v in form.items() if v})
    assert "code=" not in response.get("Location", "")


def test_a_code_without_its_verifier_gets_no_token(signed_in, client_id):
    code = allow(signed_in, client_id, secrets.token_urlsafe(48))
    refused = exchange(signed_in, client_id, code, None)
    assert refused["status"] == 400


def test_an_authorization_for_another_resource_is_refused(signed_in, client_id):
    response = signed_in.get(
        authorize_url(client_id, "v" * 50, resource="https://elsewhere.example/mcp/")
    )
    assert response.status_code == 400
    assert "MCP endpoint" in response.content.decode()


def test_a_token_for_another_resource_is_refused(signed_in, client_id):
    verifier = secrets.token_urlsafe(48)
    code = allow(signed_in, client_id, verifier)
    refused = exchange(
        signed_in, client_id, code, verifier, resource="https://elsewhere.example/mcp/"
    )
    assert refused["status"] == 400
    assert refused["error"] == "invalid_target"


def test_a_token_is_for_this_servers_mcp_only(signed_in, client_id, user):
    granted = tokens_for(signed_in, client_id)
    assert access_for(granted["access_token"], RESOURCE).user == user
    assert access_for(granted["access_token"], "http://elsewhere.example/mcp/") is None
    assert access_for(granted["access_token"], f"{BASE}/api/v1/") is None


def test_a_grant_without_a_resource_is_bound_to_mcp(signed_in, client_id):
    verifier = secrets.token_urlsafe(48)
    code = allow(signed_in, client_id, verifier, resource=None)
    granted = exchange(signed_in, client_id, code, verifier, resource=None)
    assert access_for(granted["access_token"], RESOURCE) is not None
    assert access_for(granted["access_token"], "http://elsewhere.example/mcp/") is None


def test_a_code_is_used_once(signed_in, client_id):
    verifier = secrets.token_urlsafe(48)
    code = allow(signed_in, client_id, verifier)
    assert exchange(signed_in, client_id, code, verifier)["status"] == 200
    assert exchange(signed_in, client_id, code, verifier)["status"] == 400


def test_a_refresh_token_is_rotated_and_the_old_one_refused(signed_in, client_id):
    granted = tokens_for(signed_in, client_id)
    refresh = {"grant_type": "refresh_token", "client_id": client_id, "resource": RESOURCE}
    renewed = token(signed_in, refresh_token=granted["refresh_token"], **refresh)
    assert renewed["status"] == 200
    assert renewed["refresh_token"] != granted["refresh_token"]
    assert access_for(renewed["access_token"], RESOURCE) is not None
    again = token(signed_in, refresh_token=granted["refresh_token"], **refresh)
    assert again["status"] == 400
    assert again["error"] == "invalid_grant"


def test_revoking_a_connected_app_ends_its_tokens_at_once(signed_in, client_id, user):
    granted = tokens_for(signed_in, client_id)
    access = access_for(granted["access_token"], RESOURCE)
    page = signed_in.get(reverse("mcp_server:connected_apps")).content.decode()
    assert "Assistant" in page and "assistant.example" in page
    signed_in.post(reverse("mcp_server:connected_app_revoke", args=[access.application_id]))
    assert access_for(granted["access_token"], RESOURCE) is None
    assert not grant_still_valid(user_id=user.pk, application_id=access.application_id)
    refresh = token(
        signed_in,
        grant_type="refresh_token",
        client_id=client_id,
        refresh_token=granted["refresh_token"],
    )
    assert refresh["status"] == 400
    assert "Assistant" not in signed_in.get(reverse("mcp_server:connected_apps")).content.decode()


def test_another_users_revoke_leaves_the_grant(signed_in, client_id, user, other_user, client):
    granted = tokens_for(signed_in, client_id)
    access = access_for(granted["access_token"], RESOURCE)
    client.force_login(other_user)
    client.post(reverse("mcp_server:connected_app_revoke", args=[access.application_id]))
    assert access_for(granted["access_token"], RESOURCE) is not None


def test_the_settings_page_links_connected_apps(signed_in):
    page = signed_in.get("/settings/").content.decode()
    assert reverse("mcp_server:connected_apps") in page


@pytest.mark.django_db(transaction=True)
async def test_mcp_takes_oauth_tokens_for_it_and_personal_tokens_as_before(client, user):
    from asgiref.sync import sync_to_async

    from api.tokens import create_token

    await sync_to_async(client.force_login)(user)
    registered = await sync_to_async(client.post)(
        "/oauth/register/",
        json.dumps(
            {
                "client_name": "Assistant",
                "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "none",
            }
        ),
        content_type="application/json",
    )
    granted = await sync_to_async(tokens_for)(client, registered.json()["client_id"])
    verifier = McpTokens(RESOURCE)
    seen = await verifier.verify_token(granted["access_token"])
    assert seen.subject == str(user.pk)
    assert (
        await McpTokens("http://elsewhere.example/mcp/").verify_token(granted["access_token"])
        is None
    )
    _, personal = await sync_to_async(create_token)(user=user, name="cli")
    assert (await verifier.verify_token(personal)).subject == str(user.pk)


def test_plain_http_redirects_go_only_to_a_loopback_listener(client, signed_in):
    """A code never crosses a network in the clear: http only to this device (RFC 8252)."""
    loopback, remote = "http://127.0.0.1:8765/callback", "http://assistant.example/callback"
    registered = client.post(
        "/oauth/register/",
        json.dumps(
            {
                "client_name": "Desktop",
                "redirect_uris": [loopback, remote],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
            }
        ),
        content_type="application/json",
    )
    desktop = registered.json()["client_id"]
    assert signed_in.get(authorize_url(desktop, "v" * 50, redirect_uri=loopback)).status_code == 200
    refused = signed_in.get(authorize_url(desktop, "v" * 50, redirect_uri=remote))
    assert refused.status_code == 400
    assert "assistant.example" not in refused.get("Location", "")
