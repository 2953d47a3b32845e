"""ASGI entry point: HTTP goes to Django (and /mcp/ to the MCP server, mcp_server.asgi),
websockets to Channels behind an exact Origin check and auth, and `parley-runs` channel
messages to the turn runner (with REDIS_URL, in `manage.py worker`)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ChannelNameRouter, ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from chat.engine.runner import RunnerLifecycle, RunWorker  # noqa: E402
from chat.routing import websocket_urlpatterns  # noqa: E402
from config.middleware import AsgiSecurity  # noqa: E402
from config.origins import ExactOriginValidator  # noqa: E402
from mcp_server.asgi import McpEndpoint, host_allowed, mount  # noqa: E402
from questions.routing import websocket_urlpatterns as question_websockets  # noqa: E402

application = RunnerLifecycle(
    ProtocolTypeRouter(
        {
            # /mcp/: Parley as an MCP server (mcp_server.asgi); everything else: Django.
            # Django's middleware does not run for /mcp/: AsgiSecurity does its part there.
            "http": mount(AsgiSecurity(McpEndpoint(), host_allowed=host_allowed), django_asgi_app),
            "websocket": ExactOriginValidator(
                AuthMiddlewareStack(URLRouter(websocket_urlpatterns + question_websockets))
            ),
            "channel": ChannelNameRouter({settings.PARLEY_RUN_CHANNEL: RunWorker.as_asgi()}),
        }
    )
)
