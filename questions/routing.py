from django.urls import path

from questions.consumers import AttentionConsumer

websocket_urlpatterns = [
    path("ws/me/", AttentionConsumer.as_asgi()),
]
