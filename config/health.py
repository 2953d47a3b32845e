"""`GET /healthz` for load balancers and orchestrators: does this process reach its database
and its channel layer? With MCP servers configured, their state is in the details
(`mcpServers`), without changing the status.

Cheap enough to poll every second (no login, no session, no writes) and bounded: each part
has `PROBE_TIMEOUT` seconds to answer, and a part that fails or hangs is reported as
"unavailable" (HTTP 503), never raised.
"""

import asyncio
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress

from asgiref.sync import sync_to_async
from django.contrib.auth.decorators import login_not_required
from django.db import close_old_connections, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe

from chat.engine import dispatch
from mcp_client import status

logger = logging.getLogger("parley.health")

# Seconds each part may take to answer.
PROBE_TIMEOUT = 1.0

# The database is probed from one thread of its own, one probe at a time: polls keep reusing
# one connection (a thread per request would open a connection per poll), and a database that
# hangs holds one thread and one connection however often the probe is polled.
database_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="parley-healthz")
_database_probe: Future | None = None
_database_probe_lock = threading.Lock()


@login_not_required
@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    database, channel_layer = await asyncio.gather(
        answers("database", database_answers), answers("channel layer", dispatch.queue_answers)
    )
    healthy = database and channel_layer
    body = {
        "status": "ok" if healthy else "unavailable",
        "database": "ok" if database else "unavailable",
        "channelLayer": "ok" if channel_layer else "unavailable",
    }
    if servers := await mcp_servers():
        # Details only: a tool server that is down costs its tools, not this process's health.
        body["mcpServers"] = servers
    response = JsonResponse(body, status=200 if healthy else 503)
    response["Cache-Control"] = "no-store"
    return response


async def mcp_servers() -> dict[str, str]:
    """Each configured MCP server: "ok" once connected, else why not (mcp_client.status)."""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT):
            return await sync_to_async(status.summary, thread_sensitive=False)()
    except Exception as error:
        logger.warning("health check: the MCP servers' state: %s: %s", type(error).__name__, error)
        return {}


async def answers(part: str, probe) -> bool:
    """Whether `probe()` completes within PROBE_TIMEOUT; a failure is logged, not raised."""
    try:
        async with asyncio.timeout(PROBE_TIMEOUT):
            await probe()
    except TimeoutError:
        logger.warning("health check: the %s did not answer within %ss", part, PROBE_TIMEOUT)
        return False
    except Exception as error:
        logger.warning("health check: the %s failed: %s: %s", part, type(error).__name__, error)
        return False
    return True


async def database_answers() -> None:
    """The database answers a trivial query (the probe thread's; see `database_thread`)."""
    loop = asyncio.get_running_loop()
    answered = loop.create_future()

    def settle(probe: Future) -> None:
        if answered.done():  # timed out already
            return
        if probe.exception() is not None:
            answered.set_exception(probe.exception())
        else:
            answered.set_result(None)

    def deliver(probe: Future) -> None:
        with suppress(RuntimeError):  # the loop closed: nobody waits for this answer any more
            loop.call_soon_threadsafe(settle, probe)

    current_database_probe().add_done_callback(deliver)
    await answered


def current_database_probe() -> Future:
    """The probe in flight, or a new one when none is."""
    global _database_probe
    with _database_probe_lock:
        if _database_probe is None or _database_probe.done():
            _database_probe = database_thread.submit(ping_database)
        return _database_probe


def ping_database() -> None:
    # As channels' database_sync_to_async does: drop a connection that broke or aged out.
    close_old_connections()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        close_old_connections()
