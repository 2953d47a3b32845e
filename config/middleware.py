import logging
import re
import uuid

from asgiref.sync import iscoroutinefunction
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.http import HttpResponse, JsonResponse
from django.utils.cache import add_never_cache_headers
from django.utils.decorators import sync_and_async_middleware
from django.utils.deprecation import MiddlewareMixin

from chat import views
from chat.errors import REDIS_UNAVAILABLE, ServiceUnavailable
from config.logging import current_request_id

logger = logging.getLogger("parley.redis")

REQUEST_ID_HEADER = "X-Request-ID"
# What a proxy's id looks like (a UUID, nginx's $request_id, a trace id); anything else (too
# long, spaces, control characters that could forge log lines) is replaced.
WELL_FORMED_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:=+/@-]{0,127}", re.ASCII)


class LoginRequiredExceptApiMiddleware(LoginRequiredMiddleware):
    """Every page needs a signed-in user; the JSON API authenticates itself (a 401, not a
    redirect to the login form)."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith("/api/"):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


class ServiceUnavailableMiddleware(MiddlewareMixin):
    """A view that needed Redis while Redis could not be reached (chat.errors
    .REDIS_UNAVAILABLE: logging in and sending a message count against the limits, an event
    stream subscribes to live events) answers 503 with Retry-After and a message to try again
    in a moment, instead of a 500: JSON `{"message"}` in the API, as its other errors; the
    message alone to htmx, which static/parley.js shows where the person acted; else the
    error page. The one place this is decided, for every view."""

    def process_exception(self, request, exception):
        if not isinstance(exception, REDIS_UNAVAILABLE):
            return None
        logger.warning(
            "Redis is unavailable (%s %s): %s: %s",
            request.method,
            request.path,
            type(exception).__name__,
            exception,
        )
        if not request.path_info.startswith("/api/") and not request.htmx:
            return views.service_unavailable(request)
        error = ServiceUnavailable()
        if request.path_info.startswith("/api/"):
            response = JsonResponse({"message": str(error.message)}, status=error.status)
        else:
            response = HttpResponse(
                error.message, content_type="text/plain; charset=utf-8", status=error.status
            )
        response["Retry-After"] = str(error.retry_after)
        return response


@sync_and_async_middleware
def request_id_middleware(get_response):
    """Give each request an id: the proxy's `X-Request-ID` when well-formed, else a new one.

    The id is `request.request_id`, the response's `X-Request-ID`, and the `request_id` of
    every log record emitted while the request is handled (config.logging). Goes first in
    MIDDLEWARE, so that redirects and refusals by other middleware carry it too.
    """

    def tagged(request, response):
        response[REQUEST_ID_HEADER] = request.request_id
        return response

    if iscoroutinefunction(get_response):

        async def middleware(request):
            token = current_request_id.set(assign_request_id(request))
            try:
                response = await get_response(request)
            finally:
                current_request_id.reset(token)
            return tagged(request, response)

    else:

        def middleware(request):
            token = current_request_id.set(assign_request_id(request))
            try:
                response = get_response(request)
            finally:
                current_request_id.reset(token)
            return tagged(request, response)

    return middleware


def assign_request_id(request) -> str:
    proposed = request.headers.get(REQUEST_ID_HEADER, "")
    if WELL_FORMED_REQUEST_ID.fullmatch(proposed):
        request.request_id = proposed
    else:
        request.request_id = uuid.uuid4().hex
    return request.request_id


@sync_and_async_middleware
def no_store_middleware(get_response):
    """Pages, API responses and event streams carry transcripts, tokens and questions:
    `Cache-Control: no-store` on every response without caching headers of its own (static
    files come from WhiteNoise with theirs, and keep their long cache)."""
    if iscoroutinefunction(get_response):

        async def middleware(request):
            return no_store(await get_response(request))

    else:

        def middleware(request):
            return no_store(get_response(request))

    return middleware


def no_store(response):
    """`no-store` unless the view chose its own caching (every Parley view that does says
    no-store)."""
    if not response.has_header("Cache-Control"):
        add_never_cache_headers(response)
    return response
