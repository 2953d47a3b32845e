"""GET /conversations/{id}/events: the conversation's changes as server-sent events, resumed
after Last-Event-ID (api.events builds the stream)."""

import re

from asgiref.sync import sync_to_async
from django.utils.translation import gettext as _
from ninja import Header, Query, Router
from ninja.errors import HttpError

from api.auth import credential_check
from api.events import EventStreamResponse, event_stream
from api.schemas import ERRORS
from chat.errors import ConversationNotFound
from chat.selectors import conversation_for_user
from core.limits import StreamSlot

# A change cursor as a client sends it back: ASCII digits only (str.isdigit also accepts "²"),
# and short enough to be a bigint (int() refuses strings of more than 4,300 digits).
CURSOR = re.compile(r"[0-9]{1,18}")

router = Router()


@router.get(
    "/conversations/{conversation_id}/events", response={200: None, **ERRORS}, by_alias=True
)
async def events(
    request,
    conversation_id: int,
    after: int | None = Query(None, ge=0, le=10**18),
    last_event_id: str | None = Header(
        None,
        alias="Last-Event-ID",
        description="The id of the last event received: resume after it (a whole number).",
    ),
):
    """Server-sent events: `state_change`, `message` and `text` (streamed text); event ids
    increase, and a reconnect with Last-Event-ID resumes without gaps."""
    last_id = last_event_id or (str(after) if after is not None else "")
    if last_id and not CURSOR.fullmatch(last_id):
        raise HttpError(
            422, _("Last-Event-ID must be an event id from this stream (a whole number).")
        )
    cursor = int(last_id) if last_id else None
    slot = StreamSlot(request.user.pk)  # raises TooManyStreams (before any database work)
    try:
        await sync_to_async(conversation_for_user)(
            user=request.user, conversation_id=conversation_id
        )
    except ConversationNotFound:
        slot.release()
        raise
    response = EventStreamResponse(
        event_stream(request.user, conversation_id, cursor, credential_check(request), slot),
        slot=slot,
    )
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"
    return response
