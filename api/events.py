"""Server-sent events for one conversation, built on the same change cursor as the websocket.

The stream's event ids are the conversation's change cursor: a client that reconnects with
Last-Event-ID gets every change after it (no gaps), and a new client starts from now with a
`state_change` snapshot.
"""

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from channels.db import database_sync_to_async
from django.conf import settings
from django.http import StreamingHttpResponse

from api import results
from chat.errors import ConversationNotFound
from chat.live import sessions
from chat.selectors import conversation_for_user, transcript_changes
from core.events import conversation_group, subscribe, user_group
from core.limits import StreamSlot

MIN_BATCH_SECONDS = 0.25


@dataclass(frozen=True)
class Credential:
    """What authenticated a stream, and how to ask whether it still does (synchronous)."""

    user_id: int
    still_valid: Callable[[], bool]
    session_key: str | None = None


def sse(event: str, data: dict, event_id: int | None = None) -> str:
    head = f"event: {event}\n"
    if event_id is not None:
        head += f"id: {event_id}\n"
    return head + f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _batch(user, conversation_id: int, cursor: int | None, state: dict) -> tuple[list[str], int]:
    """The events for everything after `cursor` (a snapshot when None), and the new cursor."""
    if cursor is None:
        conversation = conversation_for_user(user=user, conversation_id=conversation_id)
        state["last"] = conversation.agent_state
        return [sse("state_change", _state(conversation), conversation.seq)], conversation.seq
    changes = transcript_changes(user=user, conversation_id=conversation_id, after=cursor)
    if changes.cursor == cursor:
        return [], cursor
    events = []
    for message in changes.messages:
        data = results.message_data(message)
        events.append(sse("message", data))
        previous = state["texts"].get(message.pk, "")
        if message.role == "assistant" and data["text"] != previous:
            delta = (
                data["text"][len(previous) :] if data["text"].startswith(previous) else data["text"]
            )
            events.append(
                sse("text", {"messageId": message.pk, "delta": delta, "text": data["text"]})
            )
            state["texts"][message.pk] = data["text"]
    conversation = changes.conversation
    if conversation.agent_state != state.get("last"):
        state["last"] = conversation.agent_state
        events.append(sse("state_change", _state(conversation)))
    if not events:
        events.append(sse("conversation", results.conversation_data(conversation)))
    # The id goes on the batch's last event: a reconnect resumes after the whole batch.
    events[-1] = events[-1].replace("\ndata: ", f"\nid: {changes.cursor}\ndata: ", 1)
    return events, changes.cursor


def _state(conversation) -> dict:
    result = results.agent_result(conversation, since_order=conversation.messages.count())
    return {
        "state": conversation.agent_state,
        "status": result["status"],
        "conversationId": conversation.pk,
        "pendingQuestion": result["pendingQuestion"],
        "pendingQuestions": result["pendingQuestions"],
    }


class EventStreamResponse(StreamingHttpResponse):
    """An event stream that gives its StreamSlot back when the server closes the response
    (also when the client left before the stream began)."""

    def __init__(self, stream, *, slot: StreamSlot) -> None:
        super().__init__(stream, content_type="text/event-stream")
        self.slot = slot

    def close(self) -> None:
        self.slot.release()
        super().close()


async def event_stream(
    user, conversation_id: int, cursor: int | None, credential: Credential, slot: StreamSlot
):
    """The stream ends with `revoked` once its credential no longer holds (logout, password
    change, deactivation, token revoked): checked before every batch, at least every
    AUTH_RECHECK_SECONDS, and at once on the user's `auth.changed` (chat.live.sessions)."""
    state: dict = {"texts": {}}

    def step(cursor: int | None) -> tuple[list[str] | None, int | None]:
        """One database visit: None for events when the credential no longer holds."""
        slot.touch()
        if not credential.still_valid():
            return None, cursor
        return _batch(user, conversation_id, cursor, state)

    groups = (conversation_group(conversation_id), user_group(credential.user_id))
    async with subscribe(*groups) as changes:
        yield "retry: 2000\n\n"
        quiet_since = last_batch = time.monotonic()
        while True:
            ended = changes.last_event and sessions.ended_here(
                changes.last_event, credential.session_key
            )
            if not ended:
                # Bursts of changes (streamed text) are read together, at most this often:
                # open streams cost the server a bounded amount whatever the writer does.
                await asyncio.sleep(max(0.0, last_batch + MIN_BATCH_SECONDS - time.monotonic()))
                last_batch = time.monotonic()
                try:
                    events, cursor = await database_sync_to_async(step)(cursor)
                except ConversationNotFound:
                    yield sse("gone", {"conversationId": conversation_id})
                    return
            if ended or events is None:
                yield sse("revoked", {"conversationId": conversation_id})
                return
            for event in events:
                yield event
            if changes.closed:
                # The server is restarting: the client reconnects (to another process behind
                # the proxy) with Last-Event-ID and misses nothing.
                yield sse("closing", {"conversationId": conversation_id})
                return
            if events:
                quiet_since = time.monotonic()
            woke = await changes.wait(sessions.AUTH_RECHECK_SECONDS)
            quiet = time.monotonic() - quiet_since >= settings.PARLEY_STREAM_KEEPALIVE_SECONDS
            if not woke and not changes.closed and quiet:
                quiet_since = time.monotonic()
                yield ": keepalive\n\n"
