from django.urls import path

from slackbot import views

app_name = "slackbot"

urlpatterns = [
    path(
        "integrations/slack/interactions",
        views.interactions_endpoint,
        name="interactions",
    ),
    path("settings/slack/link/", views.link, name="link"),
    path("settings/slack/unlink/", views.unlink, name="unlink"),
    path("settings/slack/channels/", views.connect, name="connect"),
    path(
        "settings/slack/channels/<int:conversation_id>/disconnect/",
        views.disconnect,
        name="disconnect",
    ),
]
