"""`manage.py worker`: runs the turns sent over the channel layer (REDIS_URL), any number of
workers on any machine. Sweeps for turns whose runner died from startup, and on SIGTERM or
SIGINT hands its running turns back at once and exits (chat.engine.runner.shutdown).

A Redis that goes away (a restart, a failover) is ridden out: the worker waits for it, trying
again with growing pauses, and goes on taking turns once it answers. One that stays away for
PARLEY_WORKER_RIDE_OUT_SECONDS (30 s) ends the worker, for its supervisor to restart it."""

import asyncio
import contextlib
import logging
import signal

from channels.layers import get_channel_layer
from channels.routing import get_default_application
from channels.worker import Worker
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from chat.engine import dispatch, runner
from chat.engine.eventloop import new_event_loop
from core.errors import REDIS_UNAVAILABLE

logger = logging.getLogger("parley.runner")

# A worker's pauses between tries to reach a Redis it lost (for PARLEY_WORKER_RIDE_OUT_SECONDS
# before it exits): the first, doubled after each failed try, up to the last. Redis is back
# in service within MAX_RETRY_SECONDS (plus a try) of answering again.
FIRST_RETRY_SECONDS = 0.25
MAX_RETRY_SECONDS = 2.0
# How long one try may take: a Redis that accepts connections and never answers fails it.
TRY_SECONDS = 2.0


class RidingOutLayer:
    """The channel layer the worker listens on, whose receive() rides out a Redis outage: on
    a Redis error it waits until the layer carries a message again (dispatch.queue_answers),
    then receives again. Everything else is the layer's own."""

    def __init__(self, layer) -> None:
        self.layer = layer

    def __getattr__(self, name: str):
        return getattr(self.layer, name)

    async def receive(self, channel: str) -> dict:
        while True:
            try:
                return await self.layer.receive(channel)
            except REDIS_UNAVAILABLE as error:
                await self.wait_for_redis(error)

    async def wait_for_redis(self, error: Exception) -> None:
        """Return once Redis answers again; re-raise `error` if it has not within
        PARLEY_WORKER_RIDE_OUT_SECONDS of it."""
        loop = asyncio.get_running_loop()
        lost = loop.time()
        logger.warning("lost Redis (%s: %s); trying again", type(error).__name__, error)
        pause = FIRST_RETRY_SECONDS
        ride_out = settings.PARLEY_WORKER_RIDE_OUT_SECONDS
        while True:
            if loop.time() + pause - lost > ride_out:
                logger.error("Redis did not answer for %gs: the worker stops", ride_out)
                raise error
            await asyncio.sleep(pause)
            try:
                async with asyncio.timeout(TRY_SECONDS):
                    await dispatch.queue_answers(self.layer)
            except (*REDIS_UNAVAILABLE, TimeoutError) as still:
                logger.warning(
                    "Redis still unavailable after %.1fs (%s: %s)",
                    loop.time() - lost,
                    type(still).__name__,
                    still,
                )
                pause = min(pause * 2, MAX_RETRY_SECONDS)
                continue
            logger.warning("Redis answers again after %.1fs", loop.time() - lost)
            return


class Command(BaseCommand):
    help = "Run agent turns sent over the channel layer (needs REDIS_URL)."

    def handle(self, *args, **options) -> None:
        if not settings.REDIS_URL:
            raise CommandError("Workers need a shared channel layer: set REDIS_URL.")
        asyncio.run(self.serve(), loop_factory=new_event_loop)

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        runner.start_in_this_loop()
        worker = Worker(
            application=get_default_application(),
            channels=[settings.PARLEY_RUN_CHANNEL],
            channel_layer=RidingOutLayer(get_channel_layer()),
        )
        serving = asyncio.create_task(worker.arun())
        stopping = asyncio.create_task(stop.wait())
        logger.info("worker listening on %s", settings.PARLEY_RUN_CHANNEL)
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        serving.cancel()
        stopping.cancel()
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await serving  # re-raises what stopped it (a lost channel layer): exit non-zero
        finally:
            await runner.shutdown()
            logger.info("worker stopped")
