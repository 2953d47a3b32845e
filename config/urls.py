from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from django.views.i18n import set_language

from api import views as api_views
from api.api import api
from config import auth, health

urlpatterns = [
    # Probed by load balancers: no login, and exempt from SECURE_SSL_REDIRECT (settings).
    path("healthz", health.healthz, name="healthz"),
    path("login/", auth.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # The language switcher also serves the login page, before anyone is signed in.
    path("i18n/setlang/", login_not_required(set_language), name="set_language"),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("settings/tokens/", api_views.tokens, name="api_tokens"),
    path("settings/tokens/<int:token_id>/revoke/", api_views.revoke, name="api_token_revoke"),
    path("", include("chat.urls")),
    path("", include("questions.urls")),
    path("", include("accounts.urls")),
    path("", include("webhooks.urls")),
    path("", include("reach.urls")),
    path("", include("mcp_server.urls")),
    # The OAuth authorization server for /mcp/ (its metadata at /.well-known/).
    path("", include("mcp_server.oauth_urls")),
    path("", include("mcp_client.urls")),
    # Slack's Interactivity URL, and Settings' Slack section (slackbot/).
    path("", include("slackbot.urls")),
]

handler400 = "chat.views.bad_request"
handler403 = "chat.views.permission_denied"
handler404 = "chat.views.page_not_found"
handler500 = "chat.views.server_error"
