"""The conversation websocket: transport only.

The client says which change it has seen (`{"type": "sync", "after": N}`) when the socket
opens, including after every reconnect. From then on, each `chat.changed` event makes the
consumer re-read what changed after the last change it sent and push the same partials the
page renders: new messages are appended, changed ones replaced in place. A dropped
connection, a lost event or a burst of events all end the same way: no gaps, no duplicates.
"""

import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils import translation

from chat.errors import ConversationNotFound
from chat.events import conversation_group
from chat.selectors import conversation_for_user, transcript_changes

# A close code in the private range: the page does not reconnect after it.
CLOSE_NOT_FOUND = 4404


class ConversationConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]
        self.sent_seq: int | None = None  # unknown until the client says what it has
        try:
            await database_sync_to_async(conversation_for_user)(
                user=self.user, conversation_id=self.conversation_id
            )
        except ConversationNotFound:
            await self.close()  # before accept: the handshake is refused (HTTP 403)
            return
        self.group = conversation_group(self.conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            data = json.loads(text_data or "")
            after = int(data["after"]) if data.get("type") == "sync" else None
        except (ValueError, TypeError, KeyError, AttributeError):
            after = None
        if after is None or after < 0:
            return  # the only message a client sends is a sync; anything else is ignored
        self.sent_seq = after
        await self.push_changes()

    async def chat_changed(self, event: dict) -> None:
        if self.sent_seq is not None and event["seq"] > self.sent_seq:
            await self.push_changes()

    async def push_changes(self) -> None:
        try:
            html, cursor = await database_sync_to_async(self.render_changes)(self.sent_seq)
        except ConversationNotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        if html:
            self.sent_seq = cursor
            await self.send(text_data=html)

    def render_changes(self, after: int) -> tuple[str, int]:
        """The OOB fragments for everything changed after `after`, and the new cursor."""
        changes = transcript_changes(
            user=self.user, conversation_id=self.conversation_id, after=after
        )
        if changes.cursor == after:
            return "", after
        with translation.override(self.language()):
            html = render_to_string(
                "chat/conversation.html#changes",
                {"conversation": changes.conversation, "changes": changes, "after": after},
            )
        return html, changes.cursor

    def language(self) -> str:
        """The language the page itself was rendered in (LocaleMiddleware's rules)."""
        request = HttpRequest()
        request.COOKIES = self.scope.get("cookies", {})
        for name, value in self.scope.get("headers", []):
            if name == b"accept-language":
                request.META["HTTP_ACCEPT_LANGUAGE"] = value.decode("latin-1")
        return translation.get_language_from_request(request)
