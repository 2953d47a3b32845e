"""Parley as the OAuth 2.1 authorization server of its own /mcp/. django-oauth-toolkit does
the protocol (PKCE, registration, codes, tokens, rotation; settings.OAUTH2_PROVIDER); this
module binds every grant to this server's MCP resource (RFC 8707) and checks a bearer token
presented at /mcp/."""

from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext as _
from oauth2_provider.models import AccessToken, RefreshToken
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.settings import oauth2_settings
from oauthlib.common import Request
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

# The one scope: ask the user questions and ask for their approval.
SCOPE = "mcp"
MCP_PATH = "/mcp/"


def base_url_of(uri: str) -> str:
    """Parley's address: PUBLIC_URL when set, else the origin of `uri` (a request's URL)."""
    if settings.PUBLIC_URL_CONFIGURED:
        return settings.PUBLIC_URL.rstrip("/")
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def mcp_resource(base: str) -> str:
    """The resource identifier of the MCP endpoint of Parley at `base`."""
    return f"{base}{MCP_PATH}"


def is_resource(candidate: str, resource: str) -> bool:
    """Whether `candidate` names `resource` (scheme and host in any case, a trailing slash
    aside)."""
    ours, theirs = urlsplit(resource), urlsplit(candidate)
    return (
        theirs.scheme.lower() == ours.scheme.lower()
        and theirs.netloc.lower() == ours.netloc.lower()
        and theirs.path.rstrip("/") == ours.path.rstrip("/")
        and not theirs.query
        and not theirs.fragment
    )


def wrong_resource(resource: str) -> str:
    """The refusal of an authorization for another resource than `resource`."""
    return _("Parley issues tokens for its MCP endpoint %(resource)s only.") % {
        "resource": resource
    }


# Where plain http may send a code: a native app's loopback listener on the same device (no
# [::1]: a page's CSP cannot name it, so the consent form could not lead there).
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost"})


class ParleyValidator(OAuth2Validator):
    """django-oauth-toolkit's validator, with every grant bound to a resource."""

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs):
        """A registered redirect, and over plain http only to the loopback address (RFC 8252
        §7.3, RFC 9700 §2.1): a code never crosses a network in the clear."""
        parts = urlsplit(redirect_uri)
        if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
            return False
        return super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)

    def save_authorization_code(self, client_id, code, request, *args, **kwargs):
        """Precondition: the consent view (mcp_server.oauth_views.Consent) set the request's
        resource to this server's /mcp/ after refusing any other. A grant with none is refused
        (invalid_target) rather than left unbound; tokens inherit the grant's resource, and the
        toolkit refuses a token request that names another."""
        if not getattr(request, "resource", None):
            raise CustomOAuth2Error(
                error="invalid_target", description=wrong_resource(MCP_PATH), request=request
            )
        return super().save_authorization_code(client_id, code, request, *args, **kwargs)


def access_for(token: str, resource: str) -> AccessToken | None:
    """The OAuth access token `token` if it is unexpired, for the MCP scope, bound to
    `resource`, and its user is active; else None."""
    request = Request(resource)
    validator = oauth2_settings.OAUTH2_VALIDATOR_CLASS()
    if not validator.validate_bearer_token(token, [SCOPE], request):
        return None
    access = request.access_token
    if not access.resource or access.user is None or access.application_id is None:
        return None
    if not access.user.is_active:
        return None
    return access


def grant_still_valid(*, user_id: int, application_id: int) -> bool:
    """Whether the user's grant to the client stands: an unexpired access token or an unused
    refresh token of it is left (revoking the client deletes both; a refresh keeps one)."""
    now = timezone.now()
    mine = {"user_id": user_id, "application_id": application_id, "user__is_active": True}
    return (
        AccessToken.objects.filter(**mine, expires__gt=now).exists()
        or RefreshToken.objects.filter(**mine, revoked__isnull=True).exists()
    )
