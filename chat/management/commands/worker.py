"""`manage.py worker`: runs the turns sent over the channel layer (REDIS_URL), any number of
workers on any machine. Sweeps for turns whose runner died from startup, and on SIGTERM or
SIGINT hands its running turns back at once and exits (chat.engine.runner.shutdown)."""

import asyncio
import contextlib
import logging
import signal

from channels.layers import get_channel_layer
from channels.routing import get_default_application
from channels.worker import Worker
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from chat.engine import runner
from chat.engine.eventloop import new_event_loop

logger = logging.getLogger("parley.runner")


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
            channel_layer=get_channel_layer(),
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
