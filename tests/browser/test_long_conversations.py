"""A long conversation in the browser: it opens on its newest 100 messages, and earlier ones
load above what the reader sees ("Load earlier messages", or scrolling up), which stays where
it was on screen."""

import re

from playwright.sync_api import expect

from tests.browser.pages import log_in

# 250 messages in a conversation of demo's; prints the conversation's id.
MAKE_CONVERSATION = """
from django.contrib.auth.models import User
from django.db import transaction
from chat.blocks import TextBlock
from chat.models import Conversation, Role
from chat.transcript import Transcript, lock
conversation = Conversation.objects.create(owner=User.objects.get(username="demo"), title="Long")
with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
    for index in range(250):
        role = Role.USER if index % 2 == 0 else Role.ASSISTANT
        transcript.append(role=role, blocks=[TextBlock(text=f"Message number {index}")])
print(conversation.pk)
"""


def test_earlier_messages_load_in_place_by_keyboard_and_by_scrolling_up(open_page, parley_server):
    made = parley_server.manage("shell", "--no-imports", "-c", MAKE_CONVERSATION)
    conversation_id = int(made.split()[-1])
    page = open_page(parley_server, viewport={"width": 1280, "height": 800})
    log_in(page)
    page.goto(f"/c/{conversation_id}/")
    messages = page.locator("#transcript > .message")
    expect(messages).to_have_count(100)
    expect(messages.first).to_contain_text("Message number 150")
    expect(messages.last).to_contain_text("Message number 249")

    # By keyboard: the reader goes to the button and presses Enter; what they saw stays put.
    load = page.get_by_role("button", name="Load earlier messages")
    load.focus()
    seen = page.locator(
        "#transcript > .message", has_text=re.compile(r"^\s*You.*Message number 150\b", re.S)
    )
    top = seen.bounding_box()["y"]
    page.keyboard.press("Enter")
    expect(messages).to_have_count(200)
    expect(messages.first).to_contain_text("Message number 50")
    expect(page.get_by_role("button", name="Load earlier messages")).to_be_focused()
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => done()))")
    assert abs(seen.bounding_box()["y"] - top) < 2

    # By scrolling up to the top: the last page comes, and there is nothing before it.
    for _ in range(20):
        page.mouse.wheel(0, -5_000)
        if messages.count() == 250:
            break
        page.wait_for_timeout(100)
    expect(messages).to_have_count(250)
    expect(messages.first).to_contain_text("Message number 0")
    expect(page.get_by_role("button", name="Load earlier messages")).to_have_count(0)
