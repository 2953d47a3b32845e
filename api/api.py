"""Parley's JSON API (django-ninja): /api/v1/, OpenAPI at /api/v1/openapi.json, docs at
/api/v1/docs. Every endpoint goes through the same services as the web UI; each resource's
endpoints are a Router of api.routers, and its schemas are in api.schemas."""

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.operation import Operation
from ninja.parser import Parser

from api.auth import BearerToken, Session
from api.routers import (
    answers,
    conversations,
    events,
    members,
    messages,
    questions,
    rules,
    tool_requests,
)
from core.errors import ParleyError, RateLimited
from questions.errors import NestedTooDeeply
from questions.tool_input import text_nesting_depth

# Levels of arrays and objects in a request body: far more than any endpoint reads (edited
# arguments stop at questions.approvals.MAX_ARGUMENTS_DEPTH), and far less than the stack that
# parsing and checking a body need.
MAX_BODY_DEPTH = 64
BODY_TOO_DEEP = gettext_lazy(
    "The request body nests arrays and objects too deeply: at most %(limit)s levels."
)


class BoundedJson(Parser):
    """JSON bodies, refused before they are parsed when they nest deeper than MAX_BODY_DEPTH
    (Python's parser recurses, and raises RecursionError a few hundred levels down)."""

    def parse_body(self, request: HttpRequest):
        if text_nesting_depth(request.body) > MAX_BODY_DEPTH:
            raise NestedTooDeeply(BODY_TOO_DEEP % {"limit": MAX_BODY_DEPTH})
        return super().parse_body(request)


class ParleyAPI(NinjaAPI):
    def get_openapi_operation_id(self, operation: Operation) -> str:
        # django-ninja names an operation after its function's module; the endpoints were all
        # in this module once, and clients generated from the document name their methods
        # after these ids, so they keep that module's name (tests/api/test_openapi.py).
        return f"api_api_{operation.view_func.__name__}"


api = ParleyAPI(
    title="Parley API",
    version="1",
    description="Conversations with an agent that can pause and ask structured questions.",
    auth=[BearerToken(), Session()],
    urls_namespace="api",
    parser=BoundedJson(),
)

# In the order of the document's paths.
for resource in (
    conversations,
    messages,
    answers,
    tool_requests,
    events,
    members,
    questions,
    rules,
):
    api.add_router("", resource.router)


# --- Errors: JSON with a message ---------------------------------------------------------------


@api.exception_handler(ParleyError)
def parley_error(request, error: ParleyError):
    response = api.create_response(request, {"message": str(error.message)}, status=error.status)
    if isinstance(error, RateLimited):
        response["Retry-After"] = str(error.retry_after)
    return response


@api.exception_handler(AuthenticationError)
def unauthenticated(request, error):
    message = _("Authentication required: a session or an Authorization: Bearer token.")
    return api.create_response(request, {"message": message}, status=401)


@api.exception_handler(ValidationError)
def invalid(request, error: ValidationError):
    return api.create_response(
        request, {"message": _("The request is not valid."), "errors": error.errors}, status=422
    )


@api.exception_handler(RequestDataTooBig)
def too_big(request, error):
    message = _("The request body is too large: the limit is %(limit)s KiB.") % {
        "limit": settings.DATA_UPLOAD_MAX_MEMORY_SIZE // 1024
    }
    return api.create_response(request, {"message": message}, status=413)


@api.exception_handler(HttpError)
def http_error(request, error: HttpError):
    # django-ninja answers a body its parser refused with its own 400, caused by the refusal.
    if isinstance(error.__cause__, ParleyError):
        return parley_error(request, error.__cause__)
    return api.create_response(request, {"message": str(error)}, status=error.status_code)
