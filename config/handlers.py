"""Django's ASGI handler, with the whole request in one trip to a thread."""

from contextvars import ContextVar

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler

from config.threads import Block, sync_threads

# The request's hold on its kept thread (config.threads), for send_response.
_block: ContextVar[Block] = ContextVar("parley_request_thread")


class SyncStackASGIHandler(ASGIHandler):
    """Runs the middleware chain and the view together in the request's thread.

    Every middleware in MIDDLEWARE and every page view is sync. Django's own ASGI handler
    ends its chain in an async handler all the same, so a request went to a thread for the
    chain, back to the event loop to resolve the URL, to the thread again for each sync
    process_view and for the view, and back each time: 7 trips between the loop and a thread
    per page (21 with the middleware in async mode). Here Django builds its sync chain, as
    under WSGI, and the request goes to its thread once; only Django's request signals and
    the response's close make trips of their own. Each trip waits for the GIL in a busy
    process; measured on a 2-core machine, the login page costs ~2.4 ms of CPU against ~3.4
    (tests/test_middleware.py counts the trips).

    Async views (the API's event stream, waits and posts) still work: Django's sync path runs
    them with async_to_sync, on the event loop, as it did at the end of the old chain.

    Each request runs on a thread of its own, as in Django's handler, but one kept from an
    earlier request, with its database connection (config.threads).
    """

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        async with sync_threads.context() as block:
            token = _block.set(block)
            try:
                await self.handle(scope, receive, send)
            finally:
                _block.reset(token)

    async def send_response(self, response, send):
        """An event stream (a response streamed from an async iterator: api.events) may stay
        open for hours: its request's thread, and that thread's database connection, go back
        to the kept threads once its view has returned, and each of the stream's database
        visits borrows one (chat.events' waits need none). Before, every open stream held a
        thread of its own (with its connection) until it closed."""
        if response.streaming and response.is_async:
            await _block.get().end()
        await super().send_response(response, send)

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
