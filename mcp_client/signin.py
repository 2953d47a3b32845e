"""Each user's own sign-in to an MCP server that asks for one (`"auth": "oauth"` in MCP_CONFIG),
as the MCP authorization specification describes the client's part: OAuth 2.1 authorization
code with PKCE (S256), the server found from its 401 (protected resource metadata, RFC 9728;
authorization server metadata, RFC 8414), Parley registered as a client by the operator's
client id, a Client ID Metadata Document, or dynamic registration (RFC 7591), tokens bound to
the server (RFC 8707) and refreshed before they expire.

The flow spans two requests of the person's browser, which any process may serve: `begin`
returns the authorization URL and what the callback needs (kept in the person's session);
`finish` trades the code for tokens; `keep` stores them sealed (core.sealed) on the user's
`SignIn`. At run time `Bearer` is the HTTP client's auth of that user's calls: it sends the
token, refreshes it (once per expiry across processes: the row is locked while it refreshes),
and on a 401 refreshes and sends the request again (the server ran nothing); a server that
still refuses, or asks for more scope (403 `insufficient_scope`), marks the sign-in as needing a
new "Connect". Discovery, registration, PKCE and the token responses are the `mcp` SDK's
(docs/developers/decisions/0007-signing-in-to-mcp-servers.md).
"""

import base64
import contextlib
import secrets
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import quote, urlencode

import httpx2
from channels.db import database_sync_to_async
from django.core.cache import cache
from django.db import transaction
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from mcp.client.auth import OAuthFlowError, PKCEParameters
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_info_from_metadata_url,
    create_client_registration_request,
    create_oauth_metadata_request,
    extract_field_from_www_auth,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    get_client_metadata_scopes,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
    issuers_match,
    should_use_client_metadata_url,
    validate_authorization_response_iss,
    validate_metadata_issuer,
)
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url
from mcp_types import LATEST_PROTOCOL_VERSION
from pydantic import ValidationError

from chat.models import Conversation
from core.sealed import Unreadable, seal, unseal
from mcp_client.config import HttpServer, ServerConfig
from mcp_client.models import SignIn

# A token is refreshed when it has less than this left.
REFRESH_MARGIN = timedelta(seconds=60)
# How long a person may take at the server's consent page before the flow is stale.
FLOW_SECONDS = 15 * 60
HTTP_SECONDS = 30.0
# The cache key of a per-user server's newest listing of its tools.
LISTING = "mcp-client:listing:{server}"
# How a client authenticates at the token endpoint (RFC 7591 `token_endpoint_auth_method`).
PUBLIC, BASIC, POST = "none", "client_secret_basic", "client_secret_post"

# Why a sign-in must be made again: the code kept on the row (SignIn.problem), and its words
# (on /settings/tools/ in the person's language; in English for the model).
REFUSED, REFRESH_FAILED, MORE_SCOPE, UNREADABLE = (
    "refused",
    "refresh_failed",
    "more_scope",
    "unreadable",
)
PROBLEMS = {
    REFUSED: _("The server refused your sign-in."),
    REFRESH_FAILED: _("Your sign-in expired and could not be renewed."),
    MORE_SCOPE: _("The server needs more access than you granted."),
    UNREADABLE: _("Parley’s keys changed, so your sign-in can no longer be read."),
}


def problem_text(code: str) -> str:
    """The words of a sign-in's problem code, in the active language."""
    return str(PROBLEMS.get(code, PROBLEMS[REFUSED]))


class SignInFailed(Exception):
    """The flow cannot go on; its message is for the person (translatable, no secrets)."""


class NotSignedIn(Exception):
    """The user has no working sign-in to the server: `why`, a problem code (empty: they never
    connected)."""

    def __init__(self, why: str = "") -> None:
        super().__init__(why or "not connected")
        self.why = why


@dataclass(frozen=True)
class Granted:
    """What the callback won: the client it used and the tokens, for `keep`."""

    client: OAuthClientInformationFull
    tokens: OAuthToken
    token_endpoint: str
    resource: str
    # Where Disconnect revokes the tokens (RFC 7009), if the server has such an endpoint.
    revocation_endpoint: str | None = None


def _spec(server: ServerConfig) -> HttpServer:
    assert isinstance(server.spec, HttpServer) and server.per_user
    return server.spec


def _http() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(timeout=HTTP_SECONDS, follow_redirects=False)


# --- Connect: begin and finish ----------------------------------------------------------------


async def begin(server: ServerConfig, redirect_uri: str) -> tuple[str, dict]:
    """Discover the server's authorization server, have a client there, and make the
    authorization request: its URL, and the flow's state for `finish` (JSON; secrets sealed)."""
    spec = _spec(server)
    try:
        async with _http() as http:
            prm, asm, challenged = await _discover(http, spec.url, spec.headers)
            client = await _client(http, spec, asm, redirect_uri)
    except (httpx2.HTTPError, OAuthFlowError, ValidationError, ValueError) as error:
        raise SignInFailed(
            _("The server’s sign-in could not be found: %(error)s") % {"error": str(error)[:200]}
        ) from error
    if "S256" not in (asm.code_challenge_methods_supported or []):
        raise SignInFailed(_("The server’s sign-in does not support PKCE (S256), so it is unsafe."))
    resource = resource_url_from_server_url(spec.url)
    if prm is not None and prm.resource:
        resource = str(prm.resource)
    pkce = PKCEParameters.generate()
    state = secrets.token_urlsafe(32)
    scope = spec.oauth.scope or get_client_metadata_scopes(challenged, prm, asm)
    query = {
        "response_type": "code",
        "client_id": client.client_id,
        "redirect_uri": redirect_uri,
        "state": state,
        "code_challenge": pkce.code_challenge,
        "code_challenge_method": "S256",
        "resource": resource,
    }
    if scope:
        query["scope"] = scope
    pending = {
        "server": server.name,
        "state": state,
        "redirect_uri": redirect_uri,
        "resource": resource,
        "metadata": asm.model_dump(mode="json", exclude_none=True),
        "sealed": seal({"client": _dump(client), "verifier": pkce.code_verifier}),
        "until": time.time() + FLOW_SECONDS,
    }
    return f"{asm.authorization_endpoint}?{urlencode(query)}", pending


async def _discover(
    http: httpx2.AsyncClient, url: str, headers: dict[str, str]
) -> tuple[ProtectedResourceMetadata | None, OAuthMetadata, str | None]:
    """The resource's metadata (from its 401's `resource_metadata`, else the well-known
    addresses), its authorization server's metadata, and the scope its 401 asked for."""
    probe = await http.post(
        url,
        json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
        headers={
            **headers,
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LATEST_PROTOCOL_VERSION,
        },
    )
    challenged = extract_scope_from_www_auth(probe) if probe.status_code == 401 else None
    hinted = extract_resource_metadata_from_www_auth(probe) if probe.status_code == 401 else None
    prm = None
    for candidate in build_protected_resource_metadata_discovery_urls(hinted, url):
        prm = await handle_protected_resource_response(
            await http.send(create_oauth_metadata_request(candidate))
        )
        if prm is not None:
            break
    if prm is not None and prm.resource:
        # RFC 9728 §3.3: the metadata must be this server's (or a resource it is part of).
        ours = resource_url_from_server_url(url)
        if not check_resource_allowed(
            requested_resource=ours, configured_resource=str(prm.resource)
        ):
            raise OAuthFlowError(f"the metadata is for {prm.resource}, not {ours}")
    issuer = str(prm.authorization_servers[0]) if prm is not None else None
    for candidate in build_oauth_authorization_server_metadata_discovery_urls(issuer, url):
        go_on, asm = await handle_auth_metadata_response(
            await http.send(create_oauth_metadata_request(candidate))
        )
        if asm is not None:
            if issuer is not None and not issuers_match(str(asm.issuer), issuer):
                validate_metadata_issuer(asm, issuer)  # raises, naming both
            return prm, asm, challenged
        if not go_on:
            break
    raise OAuthFlowError("no authorization server metadata")


async def _client(
    http: httpx2.AsyncClient, spec: HttpServer, asm: OAuthMetadata, redirect_uri: str
) -> OAuthClientInformationFull:
    """The client Parley is at this authorization server: the operator's, a metadata document
    the server accepts, or one registered now for this sign-in."""
    if spec.oauth.clientId:
        method = BASIC if spec.oauth.clientSecret else PUBLIC
        return OAuthClientInformationFull(
            client_id=spec.oauth.clientId,
            client_secret=spec.oauth.clientSecret,
            token_endpoint_auth_method=method,
            redirect_uris=[redirect_uri],
        )
    if should_use_client_metadata_url(asm, spec.oauth.clientMetadataUrl):
        return create_client_info_from_metadata_url(
            spec.oauth.clientMetadataUrl, redirect_uris=[redirect_uri]
        )
    if asm.registration_endpoint is None:
        raise OAuthFlowError(
            "the server takes no registration: the operator must give a clientId in MCP_CONFIG"
        )
    metadata = OAuthClientMetadata(
        client_name="Parley",
        redirect_uris=[redirect_uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=PUBLIC,
    )
    request = create_client_registration_request(asm, metadata, str(asm.issuer))
    return await handle_registration_response(await http.send(request))


async def finish(pending: dict, *, code: str, state: str, iss: str | None) -> Granted:
    """Trade the authorization response's code for tokens (SignInFailed if it is not the
    response to `pending`, or the server refuses)."""
    if not secrets.compare_digest(state.encode(), pending["state"].encode()):
        raise SignInFailed(_("This sign-in does not match the one you started. Connect again."))
    if time.time() > pending["until"]:
        raise SignInFailed(_("This sign-in took too long. Connect again."))
    asm = OAuthMetadata.model_validate(pending["metadata"])
    try:
        validate_authorization_response_iss(iss, asm)
    except OAuthFlowError as error:
        raise SignInFailed(_("The sign-in came back from another server.")) from error
    inner = unseal(pending["sealed"])
    client = OAuthClientInformationFull.model_validate(inner["client"])
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": pending["redirect_uri"],
        "code_verifier": inner["verifier"],
        "resource": pending["resource"],
    }
    async with _http() as http:
        response = await http.post(
            str(asm.token_endpoint), data=_with_client(form, client), headers=_auth(client)
        )
    tokens = _tokens(response)
    if tokens is None:
        raise SignInFailed(_("The server refused to give Parley a token. Connect again."))
    revocation = str(asm.revocation_endpoint) if asm.revocation_endpoint else None
    return Granted(client, tokens, str(asm.token_endpoint), pending["resource"], revocation)


def keep(user, server: ServerConfig, granted: Granted, tools: list[dict]) -> SignIn:
    """Store the user's sign-in (replacing an earlier one) with the tools it lists."""
    sign_in, _created = SignIn.objects.update_or_create(
        user=user,
        server=server.name,
        defaults={
            "sealed": seal(
                {
                    "client": _dump(granted.client),
                    "tokens": _dump(granted.tokens),
                    "revocation_endpoint": granted.revocation_endpoint,
                }
            ),
            "token_endpoint": granted.token_endpoint,
            "resource": granted.resource,
            "expires_at": _expiry(granted.tokens),
            "tools": tools,
            "connected_at": timezone.now(),
            "refreshed_at": None,
            "problem": "",
        },
    )
    remember_listing(server.name, tools)
    return sign_in


def remember_listing(server: str, tools: list[dict]) -> None:
    with contextlib.suppress(Exception):  # a cache that is down: the rows still hold it
        cache.set(LISTING.format(server=server), tools, timeout=None)


def forget(user, server: str) -> bool:
    """Remove the user's sign-in to `server`, revoking its tokens at the server first where
    it can (RFC 7009; a server that cannot be reached keeps them until they expire); False if
    there was none."""
    sign_in = SignIn.objects.filter(user=user, server=server).first()
    if sign_in is None:
        return False
    with contextlib.suppress(Unreadable, KeyError, ValueError, httpx2.HTTPError):
        _revoke(unseal(sign_in.sealed))
    sign_in.delete()
    return True


def _revoke(inner: dict) -> None:
    """Revoke the refresh token, then the access token (RFC 7009 §2.1)."""
    endpoint = inner.get("revocation_endpoint")
    if not endpoint:
        return
    client = OAuthClientInformationFull.model_validate(inner["client"])
    tokens = OAuthToken.model_validate(inner["tokens"])
    kinds = [("refresh_token", tokens.refresh_token), ("access_token", tokens.access_token)]
    with httpx2.Client(timeout=HTTP_SECONDS / 3, follow_redirects=False) as http:
        for hint, token in kinds:
            if token:
                form = _with_client({"token": token, "token_type_hint": hint}, client)
                http.post(endpoint, data=form, headers=_auth(client))


# --- Run time ---------------------------------------------------------------------------------


def turn_user_id(conversation_id: int) -> int | None:
    """Whose account a turn of this conversation uses: who started it (a sub-agent's, who
    started its parent's turn)."""
    return (
        Conversation.objects.filter(pk=conversation_id)
        .values_list(Coalesce("parent__turn_started_by", "turn_started_by"), flat=True)
        .first()
    )


def sign_in_problem(user_id: int | None, server: str) -> str | None:
    """None if the user has a working sign-in to `server`; else why not (a problem code; "":
    never connected)."""
    problem = (
        SignIn.objects.filter(user_id=user_id, server=server)
        .values_list("problem", flat=True)
        .first()
    )
    if problem is None:
        return ""
    return problem or None


def newest_tools(server: str) -> list[dict]:
    """The tools the server listed at its newest sign-in (what the model is offered), kept
    in the cache too for when nobody is signed in."""
    listed = (
        SignIn.objects.filter(server=server)
        .exclude(tools=[])
        .order_by("-connected_at")
        .values_list("tools", flat=True)
        .first()
    )
    if listed is None:
        with contextlib.suppress(Exception):  # a cache that is down: no listing
            listed = cache.get(LISTING.format(server=server))
    return listed or []


class Bearer(httpx2.Auth):
    """One user's token on each request to the server; see the module's docstring."""

    def __init__(self, user_id: int | None, server: str) -> None:
        self.user_id = user_id
        self.server = server
        # Why the server refused this user (set before the SDK sees the failed response).
        self.refused: str = ""

    async def token(self, *, renew: bool = False) -> str:
        """The user's access token, refreshed first if it expires soon (or `renew`)."""
        if self.user_id is None:
            raise NotSignedIn()
        return await database_sync_to_async(access_token, thread_sensitive=False)(
            self.user_id, self.server, renew=renew
        )

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        request.headers["Authorization"] = f"Bearer {await self.token()}"
        response = yield request
        if response.status_code == 401:
            try:
                request.headers["Authorization"] = f"Bearer {await self.token(renew=True)}"
            except NotSignedIn as error:
                self.refused = error.why
                return
            response = yield request
        why = ""
        if response.status_code == 401:
            why = REFUSED
        elif (
            response.status_code == 403
            and extract_field_from_www_auth(response, "error") == "insufficient_scope"
        ):
            why = MORE_SCOPE
        if why:
            self.refused = why
            await database_sync_to_async(mark_problem)(self.user_id, self.server, why)


def access_token(user_id: int, server: str, *, renew: bool = False) -> str:
    """The user's access token for `server`: NotSignedIn if they have none that works. A token
    about to expire (or any, with `renew`) is refreshed first, with the row locked, so one
    process refreshes while the others wait and use its result."""
    with transaction.atomic():
        token, why = _locked_token(user_id, server, renew=renew)
    if token is None:
        raise NotSignedIn(why)
    return token


def _locked_token(user_id: int, server: str, *, renew: bool) -> tuple[str | None, str]:
    """(the token, "") or (None, why not), in the caller's transaction."""
    sign_in = SignIn.objects.select_for_update().filter(user_id=user_id, server=server).first()
    if sign_in is None:
        return None, ""
    if sign_in.problem:
        return None, sign_in.problem
    try:
        inner = unseal(sign_in.sealed)
    except Unreadable:
        return None, _problem(sign_in, UNREADABLE)
    tokens = OAuthToken.model_validate(inner["tokens"])
    fresh = sign_in.expires_at is None or sign_in.expires_at - REFRESH_MARGIN > timezone.now()
    if fresh and not renew:
        return tokens.access_token, ""
    renewed = _refresh(sign_in, inner, tokens)
    if renewed is None:
        return None, _problem(sign_in, REFRESH_FAILED)
    return renewed.access_token, ""


def _refresh(sign_in: SignIn, inner: dict, tokens: OAuthToken) -> OAuthToken | None:
    """Trade the refresh token for new tokens (RFC 6749 §6) and store them; None if there is
    no refresh token or the server refuses it."""
    if not tokens.refresh_token:
        return None
    client = OAuthClientInformationFull.model_validate(inner["client"])
    form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
    if sign_in.resource:
        form["resource"] = sign_in.resource
    try:
        with httpx2.Client(timeout=HTTP_SECONDS, follow_redirects=False) as http:
            response = http.post(
                sign_in.token_endpoint, data=_with_client(form, client), headers=_auth(client)
            )
    except httpx2.HTTPError:
        return None
    renewed = _tokens(response)
    if renewed is None:
        return None
    if renewed.refresh_token is None:  # the server does not rotate: the old one still counts
        renewed.refresh_token = tokens.refresh_token
    sign_in.sealed = seal({**inner, "tokens": _dump(renewed)})
    sign_in.expires_at = _expiry(renewed)
    sign_in.refreshed_at = timezone.now()
    sign_in.save(update_fields=["sealed", "expires_at", "refreshed_at"])
    return renewed


def mark_problem(user_id: int | None, server: str, why: str) -> None:
    SignIn.objects.filter(user_id=user_id, server=server).update(problem=why)


def _problem(sign_in: SignIn, why: str) -> str:
    sign_in.problem = why
    sign_in.save(update_fields=["problem"])
    return sign_in.problem


# --- The token endpoint -----------------------------------------------------------------------


def _with_client(form: dict, client: OAuthClientInformationFull) -> dict:
    """The token request's form with the client named (RFC 6749 §2.3.1: in the body unless it
    authenticates with HTTP Basic)."""
    form = {**form, "client_id": client.client_id}
    if client.token_endpoint_auth_method == POST and client.client_secret:
        form["client_secret"] = client.client_secret
    return form


def _auth(client: OAuthClientInformationFull) -> dict[str, str]:
    headers = {"Accept": "application/json"}
    if client.token_endpoint_auth_method == BASIC and client.client_secret:
        pair = f"{quote(client.client_id, safe='')}:{quote(client.client_secret, safe='')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    return headers


def _tokens(response: httpx2.Response) -> OAuthToken | None:
    if response.status_code != 200:
        return None
    try:
        return OAuthToken.model_validate_json(response.content)
    except ValidationError:
        return None


def _expiry(tokens: OAuthToken):
    if tokens.expires_in is None:
        return None
    return timezone.now() + timedelta(seconds=tokens.expires_in)


def _dump(model) -> dict:
    return model.model_dump(mode="json", exclude_none=True)
