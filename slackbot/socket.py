"""Socket Mode: for a Parley that Slack cannot reach (behind a firewall), a worker holds a
websocket that Slack sends interactions over (`manage.py slack_socket`), instead of the
public Interactivity URL. slack_sdk's aiohttp client opens it with the app-level token
(SLACK_APP_TOKEN; apps.connections.open at SLACK_API_URL) and opens a new one whenever Slack
asks it to, or the socket drops. Each interaction is handled by slackbot.interactions, as
the URL's are, and acknowledged with what it answers (a modal's `response_action`)."""

import asyncio
import logging

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from slackbot import interactions

logger = logging.getLogger("parley.slack")

# Seconds between the client's pings; a socket silent for four of them is opened anew.
PING_SECONDS = 5.0


def handle(payload: dict) -> dict | None:
    """One interaction, on a thread that uses the database (its connection checked first)."""
    close_old_connections()
    try:
        return interactions.handle(payload)
    finally:
        close_old_connections()


async def process(client: SocketModeClient, request: SocketModeRequest) -> None:
    """Handle an envelope and acknowledge it (every envelope is acknowledged, or Slack sends
    it again)."""
    answer = None
    if request.type == "interactive" and isinstance(request.payload, dict):
        try:
            answer = await sync_to_async(handle, thread_sensitive=True)(request.payload)
        except Exception:  # logged, and acknowledged all the same: Slack would send it again
            logger.exception("a Slack interaction over Socket Mode failed")
    response = SocketModeResponse(envelope_id=request.envelope_id, payload=answer)
    await client.send_socket_mode_response(response)


def socket_client() -> SocketModeClient:
    base_url = settings.SLACK_API_URL
    web_client = AsyncWebClient(
        token=settings.SLACK_BOT_TOKEN,
        base_url=base_url if base_url.endswith("/") else base_url + "/",
    )
    client = SocketModeClient(
        app_token=settings.SLACK_APP_TOKEN, web_client=web_client, ping_interval=PING_SECONDS
    )
    client.socket_mode_request_listeners.append(process)
    return client


async def serve(stop: asyncio.Event) -> None:
    """Hold the socket until `stop` is set."""
    client = socket_client()
    try:
        await client.connect()
        await stop.wait()
    finally:
        await client.close()
