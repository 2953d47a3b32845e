"""Django's ASGI handler, with the whole request in one trip to a thread."""

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler

from config.threads import sync_threads


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
        async with sync_threads.context():
            await self.handle(scope, receive, send)

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
