"""Message times read as a person says them: "6 minutes ago" for a message six minutes old
(with the exact time on hover), in the page's language."""

import re

from playwright.sync_api import expect

from tests.browser.pages import log_in

# A conversation of demo's with a message from six minutes ago, one from three days ago and
# one just now; prints the conversation's id.
MAKE_CONVERSATION = """
from datetime import timedelta
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from chat.blocks import TextBlock
from chat.models import Conversation, Message, Role
from chat.transcript import Transcript, lock
conversation = Conversation.objects.create(owner=User.objects.get(username="demo"), title="Times")
with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
    for text in ("three days", "six minutes", "now"):
        transcript.append(role=Role.USER, blocks=[TextBlock(text=text)])
now = timezone.now()
for text, age in (("three days", timedelta(days=3)), ("six minutes", timedelta(minutes=6))):
    Message.objects.filter(conversation=conversation, blocks__0__text=text).update(
        created_at=now - age
    )
print(conversation.pk)
"""


def test_message_times_count_back_from_now(open_page, parley_server):
    made = parley_server.manage("shell", "--no-imports", "-c", MAKE_CONVERSATION)
    conversation_id = int(made.split()[-1])
    page = open_page(parley_server)
    log_in(page)
    page.goto(f"/c/{conversation_id}/")
    times = page.locator("#transcript time.message-time")
    expect(times).to_have_text(["3 days ago", "6 minutes ago", "now"])
    expect(times.nth(1)).to_have_attribute("title", re.compile(r"\d"))
