"""`manage.py slack_socket`: the Socket Mode worker (slackbot.socket), until SIGTERM or
SIGINT. Run one per deployment that receives Slack's interactions this way."""

import asyncio
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from slackbot import socket


class Command(BaseCommand):
    help = "Receive Slack's interactions over Socket Mode (needs SLACK_APP_TOKEN)."

    def handle(self, *args, **options) -> None:
        if not (settings.SLACK_APP_TOKEN and settings.SLACK_BOT_TOKEN):
            raise CommandError("Set SLACK_APP_TOKEN and SLACK_BOT_TOKEN (docs/operators/slack.md).")
        asyncio.run(self.serve())

    async def serve(self) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, stop.set)
        self.stdout.write("Slack Socket Mode: connecting")
        await socket.serve(stop)
