"""The OAuth authorization server's addresses (django-oauth-toolkit's views under its own
namespace, which it reverses): the metadata at the origin's /.well-known/, the rest under
/oauth/."""

from django.urls import path, re_path
from oauth2_provider import views

from mcp_server.oauth_views import Consent, ResourceMetadata

app_name = "oauth2_provider"

urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        views.OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource",
        ResourceMetadata.as_view(),
        name="oauth-resource-metadata",
    ),
    # RFC 9728's form for the resource /mcp/: the well-known prefix, then the resource's path.
    re_path(
        r"^\.well-known/oauth-protected-resource/mcp/?$",
        ResourceMetadata.as_view(),
        name="oauth-resource-metadata-mcp",
    ),
    path("oauth/authorize/", Consent.as_view(), name="authorize"),
    path("oauth/token/", views.TokenView.as_view(), name="token"),
    path("oauth/revoke/", views.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register/", views.DynamicClientRegistrationView.as_view(), name="dcr-register"),
    path(
        "oauth/register/<str:client_id>/",
        views.DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]
