"""Settings, ASGI, URLs, the server, login throttling, health."""
