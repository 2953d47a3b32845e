from django.urls import path

from mcp_client import views

app_name = "mcp_client"

urlpatterns = [
    path("settings/tools/", views.tools_page, name="tools"),
    path("settings/tools/revoke/", views.revoke, name="revoke"),
]
