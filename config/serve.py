"""`python -m config.serve [daphne options]`: daphne, plus Parley's turn runner from startup
and a clean handover on shutdown.

daphne implements no ASGI lifespan, so a plain `daphne config.asgi:application` only starts
the runner's sweep at its first request, and on SIGTERM it cancels open connections but knows
nothing of turns running on its loop. daphne's CLI takes its server class as an attribute
(`CommandLineInterface.server_class`, as Channels' runserver does); this one starts the sweep
as soon as the reactor runs, and before the reactor shuts down it hands this process's turns
back (chat.engine.runner.shutdown) and lets server-sent event streams and `wait` calls answer
(daphne cancels them). Every daphne option works as usual; the application defaults to
config.asgi:application.

A request line (or a header line) longer than twisted's line limit, 16 KB, is answered with
414 URI Too Long (431 Request Header Fields Too Large) and a short text, where twisted closed
the connection without a word: daphne's factory builds ParleyHTTPChannel, twisted's
HTTPChannel with an answer in LineReceiver's lineLengthExceeded hook.

Websockets speak permessage-deflate (RFC 7692) with a client that offers it, as browsers do,
through autobahn's `perMessageCompressionAccept` option. A streamed reply is many small pushes
whose wrapper repeats, so with the compression context kept from one message to the next the
bytes on the wire fall well below the text's own length (bench/streaming.py). The cost is
memory for as long as a socket is open: its compressor. zlib's defaults take ~300 KB a socket;
the small window below ~12 KB by zlib's reckoning (bench/idle.py measures an idle socket's
whole cost). A client's compressed message may inflate to CLIENT_MESSAGE_BYTES at most: past
that, the socket is dropped before more is inflated.
"""

import asyncio
import os
import re
import sys

from twisted.internet import asyncioreactor

from chat.engine.eventloop import new_event_loop

# Twisted's asyncio reactor, as daphne installs it, but on Parley's event loop: before
# daphne's import, which would otherwise install it on asyncio's own (a process that
# imported daphne already, such as the tests', keeps the reactor it has).
if "twisted.internet.reactor" not in sys.modules:
    asyncioreactor.install(new_event_loop())

from autobahn.websocket.compress import (
    PerMessageDeflateOffer,
    PerMessageDeflateOfferAccept,
)
from daphne.cli import CommandLineInterface
from daphne.server import Server
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import translation
from django.utils.translation import gettext
from twisted.web import http

APPLICATION = "config.asgi:application"
# How long a shutdown may take to hand turns back before the process exits anyway.
HANDOVER_SECONDS = 5.0
# How long open requests get to answer by themselves before they are cancelled.
DRAIN_SECONDS = 1.0

# permessage-deflate: the server's window (2**WINDOW_BITS bytes of history; zlib's default
# 15) and memory level (default 8), and the window the client is asked for (it only sends
# syncs). Compressing takes 2**(WINDOW_BITS + 2) + 2**(MEM_LEVEL + 9) bytes plus ~6 KB, kept
# for the socket's life; decompressing 2**CLIENT_WINDOW_BITS plus ~7 KB. 1 KB of history
# holds the last pushes of a streaming reply, which is what repeats: a 50,000-character prose
# reply is about its own length on the wire, against ~3x uncompressed (make bench).
WINDOW_BITS = 10
MEM_LEVEL = 1
CLIENT_WINDOW_BITS = 9
# The most a client's compressed message may inflate to (a sync is ~40 bytes): autobahn
# drops the socket of one that inflates further as soon as the bound is passed.
CLIENT_MESSAGE_BYTES = 4096


def accept_deflate(offers: list) -> PerMessageDeflateOfferAccept | None:
    """autobahn's perMessageCompressionAccept: the client's first permessage-deflate offer,
    with this server's bounds (a smaller window than a client asked for, if it did)."""
    for offer in offers:
        if isinstance(offer, PerMessageDeflateOffer):
            return PerMessageDeflateOfferAccept(
                offer,
                # Every client message is inflated alone: a client sends one sync per socket.
                request_no_context_takeover=offer.accept_no_context_takeover,
                request_max_window_bits=CLIENT_WINDOW_BITS if offer.accept_max_window_bits else 0,
                window_bits=min(WINDOW_BITS, offer.request_max_window_bits or WINDOW_BITS),
                mem_level=MEM_LEVEL,
                max_message_size=CLIENT_MESSAGE_BYTES,
            )
    return None


# What a request line starts with (a method, then a space): a header line has a colon first.
REQUEST_LINE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+ ")
# How long the rest of a refused request is read and dropped, for the client to read the
# answer: closing with unread data would reset the connection, and the answer with it.
LINGER_SECONDS = 5


class ParleyHTTPChannel(http.HTTPChannel):
    """daphne's HTTP protocol: twisted's HTTPChannel, which answers a line longer than
    MAX_LENGTH (LineReceiver's, 16 KB) instead of closing the connection without a word."""

    refused = False

    def lineLengthExceeded(self, line: bytes) -> None:
        """LineReceiver's hook, called with the line so far: 414 for a request line, 431 for a
        header line. The connection then closes, once the client has read the answer."""
        limit = self.MAX_LENGTH // 1024
        with translation.override(settings.LANGUAGE_CODE):  # no request: no language yet
            if REQUEST_LINE.match(line):
                status = b"414 URI Too Long"
                text = gettext("This address is too long: the limit is %(limit)s KB.")
            else:
                status = b"431 Request Header Fields Too Large"
                text = gettext("A header of this request is too long: the limit is %(limit)s KB.")
        body = (text % {"limit": limit}).encode() + b"\n"
        self.refused = True
        self.transport.write(
            b"HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (status, len(body), body)
        )
        # Close the sending half once the answer is out, read on until the client closes
        # (HTTPChannel's timeout ends the wait).
        close = getattr(self.transport, "loseWriteConnection", self.transport.loseConnection)
        close()
        self.setTimeout(LINGER_SECONDS)

    def dataReceived(self, data: bytes) -> None:
        if not self.refused:
            super().dataReceived(data)


class ParleyServer(Server):
    def run(self):
        from twisted.internet import defer, reactor

        from chat.engine import runner

        def start():
            runner.start_in_this_loop()

        def configure_websockets():
            # daphne makes its websocket factory in run(), before the reactor starts. autobahn
            # resets allowNullOrigin on every call that does not name it: keep daphne's (the
            # application checks origins, and answers a refused one with a 403).
            factory = self.ws_factory
            factory.setProtocolOptions(
                perMessageCompressionAccept=accept_deflate,
                allowNullOrigin=factory.allowNullOrigin,
            )

        def configure_http():
            # daphne makes its HTTP factory in run(), before the reactor starts; a factory
            # builds whatever its `protocol` makes. With HTTP/2 (the h2 package and TLS),
            # twisted's own protocol, which switches between the two, stays.
            if not http.H2_ENABLED:
                self.http_factory.protocol = ParleyHTTPChannel

        def stop():
            return defer.Deferred.fromFuture(
                asyncio.ensure_future(runner.shutdown(grace=HANDOVER_SECONDS))
            )

        # Startup triggers fire before the asyncio loop under the reactor runs: start on its
        # first turn instead.
        reactor.callWhenRunning(reactor.callLater, 0, start)
        reactor.callWhenRunning(configure_http)
        reactor.callWhenRunning(configure_websockets)
        reactor.addSystemEventTrigger("before", "shutdown", stop)
        super().run()

    def kill_all_applications(self):
        """Let event streams and `wait` calls answer before daphne cancels what is left
        (websockets, which the page reconnects by itself)."""
        from twisted.internet import defer

        from core import events

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
    try:
        settings.INSTALLED_APPS  # noqa: B018 (loads the settings, which check SECRET_KEY)
    except ImproperlyConfigured as error:  # a setting the environment lacks: one line says it
        sys.exit(f"ImproperlyConfigured: {error}")
    if not any(":" in arg and not arg.startswith("-") for arg in argv):
        argv = [*argv, APPLICATION]
    ParleyCommandLine().run(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
