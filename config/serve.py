"""`python -m config.serve [daphne options]`: daphne, plus Parley's turn runner from startup
and a clean handover on shutdown.

daphne implements no ASGI lifespan, so a plain `daphne config.asgi:application` only starts
the runner's sweep at its first request, and on SIGTERM it cancels open connections but knows
nothing of turns running on its loop. This subclass starts the sweep as soon as the reactor
runs, and before the reactor shuts down it hands this process's turns back (chat.runner
.shutdown) and closes server-sent event streams and `wait` calls (daphne cancels them).
Every daphne option works as usual; the application defaults to config.asgi:application.
"""

import asyncio
import os
import sys

from daphne.cli import CommandLineInterface
from daphne.server import Server

APPLICATION = "config.asgi:application"
# How long a shutdown may take to hand turns back before the process exits anyway.
HANDOVER_SECONDS = 5.0
# How long open requests get to answer by themselves before they are cancelled.
DRAIN_SECONDS = 1.0


class ParleyServer(Server):
    def run(self):
        from twisted.internet import defer, reactor

        from chat import runner

        def start():
            runner.start_in_this_loop()

        def stop():
            return defer.Deferred.fromFuture(
                asyncio.ensure_future(runner.shutdown(grace=HANDOVER_SECONDS))
            )

        # Startup triggers fire before the asyncio loop under the reactor runs: start on its
        # first turn instead.
        reactor.callWhenRunning(reactor.callLater, 0, start)
        reactor.addSystemEventTrigger("before", "shutdown", stop)
        super().run()

    def kill_all_applications(self):
        """Let event streams and `wait` calls answer before daphne cancels what is left
        (websockets, which the page reconnects by itself)."""
        from twisted.internet import defer

        from chat import events

        events.close_subscriptions()

        async def drain():
            open_ = [
                details["application_instance"]
                for details in self.connections.values()
                if not details["application_instance"].done()
            ]
            if open_:
                await asyncio.wait(open_, timeout=DRAIN_SECONDS)

        drained = defer.Deferred.fromFuture(asyncio.ensure_future(drain()))
        drained.addBoth(lambda _: super(ParleyServer, self).kill_all_applications())
        return drained


class ParleyCommandLine(CommandLineInterface):
    server_class = ParleyServer


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if not any(":" in arg and not arg.startswith("-") for arg in argv):
        argv = [*argv, APPLICATION]
    ParleyCommandLine().run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
