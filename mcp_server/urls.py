from django.urls import path

from mcp_server import hook_views, oauth_views, views

app_name = "mcp_server"

urlpatterns = [
    path("settings/agents/token/", views.agent_token, name="agent_token"),
    path("settings/apps/", oauth_views.connected_apps_page, name="connected_apps"),
    path(
        "settings/apps/<int:application_id>/revoke/",
        oauth_views.revoke,
        name="connected_app_revoke",
    ),
    path(
        "hooks/claude-code/permission-request",
        hook_views.claude_code_permission_request,
        name="claude_code_permission_request",
    ),
    path(
        "hooks/claude-code/notification",
        hook_views.claude_code_notification,
        name="claude_code_notification",
    ),
    path(
        "hooks/codex/permission-request",
        hook_views.codex_permission_request,
        name="codex_permission_request",
    ),
]
