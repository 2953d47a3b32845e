from django.urls import path

from mcp_server import views

app_name = "mcp_server"

urlpatterns = [
    path("settings/agents/token/", views.agent_token, name="agent_token"),
]
