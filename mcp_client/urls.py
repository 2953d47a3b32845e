from django.urls import path

from mcp_client import views

app_name = "mcp_client"

urlpatterns = [
    path("settings/tools/", views.tools_page, name="tools"),
    path("settings/tools/rules/", views.add_rule, name="add_rule"),
    path("settings/tools/signed-in/", views.signed_in, name="signed_in"),
    path("settings/tools/<str:server>/connect/", views.connect, name="connect"),
    path("settings/tools/<str:server>/disconnect/", views.disconnect, name="disconnect"),
    path("settings/tools/rules/<int:rule_id>/", views.rule_page, name="rule"),
    path("settings/tools/rules/<int:rule_id>/revoke/", views.revoke_rule, name="revoke_rule"),
    path("settings/tools/rules/<int:rule_id>/shadow/", views.shadow_rule, name="shadow_rule"),
]
