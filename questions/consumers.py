"""The user's live channel (`/ws/me/`), open on every signed-in page: transport only.

When it opens, and whenever a conversation of the user's starts or stops waiting for them
(`attention.changed` in the user's attention group), it re-reads the pending questions and
pushes the same partials the page renders (templates/questions/live.html): the header's
"Questions" link with its count, and the state the page's script keeps the tab's title, icon,
notifications and sidebar markers in step with; on the inbox page (`?inbox=1`), every pending
question's item too. Each push is the whole state, so a lost event costs only until the next.
"""

import asyncio
import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from django.template.loader import render_to_string
from django.utils import translation

from chat.live.consumers import CLOSE_SIGNED_OUT, SignedInConsumer, SignedOut
from core import presence
from core.events import attention_group, user_group
from questions.selectors import inbox_questions_for_user, pending_questions_for_user
from questions.templatetags.attention import live_context

# A wait that ended is pushed this long after it, together with any change that comes
# meanwhile (each push is the whole state): the answer that ends a wait also resumes the
# agent, whose first words the conversation's tabs are being sent at that very moment. A new
# question is pushed at once: nobody waits to hear of it.
ATTENTION_DELAY_SECONDS = 0.1

logger = logging.getLogger("parley.presence")


class AttentionConsumer(SignedInConsumer):
    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.push_timer: asyncio.TimerHandle | None = None  # a push due (attention_changed)
        self.push_task: asyncio.Task | None = None
        self.presence_task: asyncio.Task | None = None
        if self.user is None or not self.user.is_authenticated:
            await self.close()  # before accept: the handshake is refused (HTTP 403)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.inbox = query.get("inbox") == ["1"]
        # The attention group for what waits and reminders; the user group for auth.changed
        # and the inbox's fragments.
        if not await self.join(attention_group(self.user.pk), user_group(self.user.pk)):
            return
        # An open page: Web Push leaves this user to the page's own notifications.
        await self.mark_present()
        await self.accept()
        self.presence_task = asyncio.create_task(self.stay_present())
        # The page was rendered before the socket opened: catch up on anything in between.
        await self.push()

    async def stay_present(self) -> None:
        """Mark the user present again while this socket stays open (core.presence)."""
        while True:
            await asyncio.sleep(presence.PRESENCE_REFRESH_SECONDS)
            await self.mark_present()

    async def mark_present(self) -> None:
        try:
            await presence.mark_present(self.user.pk)
        except Exception:  # a cache that cannot be reached costs a needless push, not the page
            logger.warning("could not mark user %s present", self.user.pk, exc_info=True)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Nothing a client sends changes what it is told (pages send a sync on open)."""

    async def attention_changed(self, event: dict) -> None:
        if event.get("waiting"):
            if self.push_timer is not None:  # this push reads that change too
                self.push_timer.cancel()
                self.push_timer = None
            await self.push()
        elif self.push_timer is None:  # else the push due reads this change too
            loop = asyncio.get_running_loop()
            self.push_timer = loop.call_later(ATTENTION_DELAY_SECONDS, self.push_now)

    def push_now(self) -> None:
        self.push_timer = None  # a change from now on is read by the next push
        self.push_task = asyncio.create_task(self.push())

    async def disconnect(self, code: int) -> None:
        for pending in (self.push_timer, self.push_task, self.presence_task):
            if pending is not None:
                pending.cancel()
        await super().disconnect(code)

    async def chat_access_changed(self, event: dict) -> None:
        """A conversation was shared with the user, or no longer is (chat.sharing): the
        count, and the sidebar's list."""
        await self.push(self.render_access_changed)

    def render_access_changed(self) -> str:
        html = self.render()
        with translation.override(self.language):
            return html + render_to_string("questions/live.html#sidebar_refresh")

    async def questions_reminder(self, event: dict) -> None:
        """One of the user's questions expires soon: the page notifies as for a new one."""
        await self.push(self.render_reminder, event)

    def render_reminder(self, event: dict) -> str:
        self.check_session()
        key = (event["conversation_id"], event["tool_call_id"])
        questions = pending_questions_for_user(user=self.user)
        question = next((q for q in questions if (q.conversation_id, q.tool_call_id) == key), None)
        if question is None:  # answered since: nothing to remind of
            return ""
        with translation.override(self.language):
            context = live_context(self.user, [question], inbox=self.inbox)
            return render_to_string(
                "questions/live.html#reminder", {**context, "question": question}
            )

    def wants_fragment(self, event: dict) -> bool:
        # The inbox shows every pending question's block; other pages have their own socket.
        return self.inbox

    async def push(self, render=None, *args) -> None:
        """Push what `render` (default: the whole state) makes of the database now."""
        async with self.pushing:
            if self.signed_out:
                return
            try:
                html = await database_sync_to_async(render or self.render)(*args)
            except SignedOut:
                self.signed_out = True
                await self.close(code=CLOSE_SIGNED_OUT)
                return
            await self.send_pushed(html)

    def render(self) -> str:
        self.check_session()
        read = inbox_questions_for_user if self.inbox else pending_questions_for_user
        questions = read(user=self.user)
        with translation.override(self.language):
            return render_to_string(
                "questions/live.html#push", live_context(self.user, questions, inbox=self.inbox)
            )
