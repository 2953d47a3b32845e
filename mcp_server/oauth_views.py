"""The pages of Parley's OAuth authorization server for /mcp/: the consent page
(django-oauth-toolkit's authorization view, behind Parley's login, with Parley's template and
refusals), the protected resource metadata of /mcp/, and Settings' "Connected apps"."""

from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.csp import CSP
from django.utils.decorators import method_decorator
from django.utils.translation import gettext as _
from django.views.decorators.csp import csp_override
from django.views.decorators.http import require_GET, require_POST
from oauth2_provider.views import AuthorizationView, OAuthProtectedResourceMetadataView
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error, InvalidRequestError, OAuth2Error

from mcp_server.connected_apps import connected_apps, revoke_app
from mcp_server.oauth import base_url_of, is_resource, mcp_resource, wrong_resource


def _resource(request: HttpRequest) -> str:
    return mcp_resource(base_url_of(request.build_absolute_uri("/")))


def _refusal(request: HttpRequest) -> OAuth2Error | None:
    """Why an authorization request is refused before the user is asked: PKCE with S256 is
    required (a plain challenge, or none, is refused), and the resource, if named, must be
    this server's /mcp/."""
    if not request.GET.get("code_challenge") or request.GET.get("code_challenge_method") != "S256":
        return InvalidRequestError(description=_("The app must use PKCE with S256."))
    resource = _resource(request)
    if any(not is_resource(each, resource) for each in request.GET.getlist("resource")):
        return CustomOAuth2Error(error="invalid_target", description=wrong_resource(resource))
    return None


# The consent form's Allow and Deny end at the client's redirect, which this page's CSP must
# let a form lead to: over https, or plain http to a loopback listener (the only http that
# mcp_server.oauth.ParleyValidator accepts).
CONSENT_CSP = {
    **settings.SECURE_CSP,
    "form-action": [CSP.SELF, "https:", "http://127.0.0.1:*", "http://localhost:*"],
}


@method_decorator(csp_override(CONSENT_CSP), name="dispatch")
class Consent(AuthorizationView):
    """The user, signed in to Parley, allows or denies a client; a refused request shows why
    (400) and sends nobody anywhere."""

    template_name = "mcp_server/authorize.html"

    def get(self, request, *args, **kwargs):
        refusal = _refusal(request)
        if refusal is not None:
            return self.render_to_response({"error": refusal}, status=400)
        return super().get(request, *args, **kwargs)

    def form_valid(self, form):
        """The grant is for this server's /mcp/: the resource the client named (the hidden
        field, which a page could alter, is checked again), or /mcp/ when it named none."""
        resource = _resource(self.request)
        asked = (form.cleaned_data.get("resource") or "").split()
        if any(not is_resource(each, resource) for each in asked):
            refusal = CustomOAuth2Error(
                error="invalid_target", description=wrong_resource(resource)
            )
            return self.render_to_response({"error": refusal}, status=400)
        form.cleaned_data["resource"] = resource
        return super().form_valid(form)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["redirect_host"] = urlsplit(context.get("redirect_uri") or "").netloc
        return context


class ResourceMetadata(OAuthProtectedResourceMetadataView):
    """RFC 9728 metadata of the one protected resource, /mcp/, at either address."""

    def get_resource(self, request):
        return _resource(request)


@require_GET
def connected_apps_page(request: HttpRequest) -> HttpResponse:
    apps = connected_apps(user=request.user)
    return render(request, "mcp_server/connected_apps.html", {"apps": apps})


@require_POST
def revoke(request: HttpRequest, application_id: int) -> HttpResponse:
    revoke_app(user=request.user, application_id=application_id)
    return redirect("mcp_server:connected_apps")
