"""What the conversation page shows: tool cards with their results, message times, the
empty state's suggestions, and Send while the agent replies."""

import re

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock
from chat.engine.providers import suggestions
from chat.models import AgentState, Conversation, Role
from chat.transcript import Transcript, lock

pytestmark = pytest.mark.django_db


def page_of(client, conversation) -> str:
    return client.get(reverse("chat:conversation_detail", args=[conversation.pk])).content.decode()


def test_a_tool_call_card_names_its_tool_and_holds_its_result(client, conversation, user, post):
    client.force_login(user)
    post(user, conversation, "what time is it")
    html = page_of(client, conversation)
    card = re.search(
        r'<details class="block block-tool" id="tool-[^"]+">(.*?)</details>', html, re.S
    )
    assert card is not None
    assert "Used the tool current_time" in card.group(1)
    assert "Tool result" in card.group(1) and "Done" in card.group(1)
    # No separate result card: the tool message itself shows nothing.
    assert html.count('class="block block-tool"') == 2


def tool_turns(conversation, calls: list[tuple[str, str | None]]) -> None:
    """A turn per (call id, result): the agent calls a tool, and its result follows
    (None: the tool still runs)."""
    with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
        for call_id, content in calls:
            transcript.append(role=Role.USER, blocks=[TextBlock(text="again")])
            call = ToolCallBlock(id=call_id, name="calculate", arguments={"expression": "1+1"})
            transcript.append(role=Role.ASSISTANT, blocks=[call])
            if content is not None:
                result = ToolResultBlock(tool_call_id=call_id, content=content)
                transcript.append(role=Role.TOOL, blocks=[result])


def cards(html: str) -> list[str]:
    """Each tool card's state and result, in transcript order."""
    shown = []
    for card in re.findall(r'<details class="block block-tool".*?</details>', html, re.S):
        state = re.search(r'<span class="tool-state[^"]*">([^<]+)</span>', card)[1]
        result = re.search(r"Tool result</p>\s*<pre>([^<]*)</pre>", card)
        shown.append(f"{state}: {result[1]}" if result else state)
    return shown


def test_each_tool_card_holds_its_own_result(client, conversation, user):
    client.force_login(user)
    # A provider may use a call id again in a later turn: each card has the result after it.
    tool_turns(conversation, [("c0", "first"), ("c1", "second"), ("c0", "third"), ("c9", None)])
    assert cards(page_of(client, conversation)) == [
        "Done: first",
        "Done: second",
        "Done: third",
        "Running…",
    ]


def test_a_page_of_many_tool_cards_reads_their_results_once(client, conversation, user):
    client.force_login(user)

    def queries_for_page() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/c/{conversation.pk}/").status_code == 200
        return len(queries)

    tool_turns(conversation, [(f"a{i}", str(i)) for i in range(3)])
    few = queries_for_page()
    tool_turns(conversation, [(f"b{i}", str(i)) for i in range(30)])
    assert queries_for_page() == few
    assert cards(page_of(client, conversation))[-1] == "Done: 29"


def test_every_message_has_its_time(client, conversation, user, post):
    client.force_login(user)
    post(user, conversation, "hello")
    html = page_of(client, conversation)
    assert len(re.findall(r'<time class="message-time" datetime="\d{4}-\d\d-\d\dT', html)) == 2


def test_an_empty_conversation_suggests_what_the_scripted_agent_answers(client, conversation, user):
    client.force_login(user)
    html = page_of(client, conversation)
    assert suggestions()
    for suggestion in suggestions():
        assert f'value="{suggestion}"' in html


def test_send_is_disabled_while_a_turn_runs(client, conversation, user):
    client.force_login(user)
    assert "disabled>Send</button>" not in page_of(client, conversation)
    Conversation.objects.filter(pk=conversation.pk).update(agent_state=AgentState.LLM_REQUESTING)
    html = page_of(client, conversation)
    assert 'class="button-primary" disabled>Send</button>' in html
    assert ">Stop</button>" in html


def long_transcript(conversation, length: int) -> None:
    with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
        for index in range(length):
            role = Role.USER if index % 2 == 0 else Role.ASSISTANT
            transcript.append(role=role, blocks=[TextBlock(text=f"message {index}")])


def shown_texts(html: str) -> list[int]:
    return [int(n) for n in re.findall(r"block-text[^>]*>(?:<p>)?message (\d+)", html)]


def test_a_long_conversation_opens_on_its_newest_messages_and_loads_earlier_ones(
    client, conversation, user
):
    client.force_login(user)
    long_transcript(conversation, 250)
    html = page_of(client, conversation)
    assert shown_texts(html) == list(range(150, 250))
    earlier = reverse("chat:earlier_messages", args=[conversation.pk])
    assert f'hx-get="{earlier}?before=150"' in html
    assert ">Load earlier messages</button>" in html

    page = client.get(earlier, {"before": 150}).content.decode()
    assert shown_texts(page) == list(range(50, 150))
    assert f'hx-get="{earlier}?before=50"' in page
    first = client.get(earlier, {"before": 50}).content.decode()
    assert shown_texts(first) == list(range(50))
    assert "Load earlier messages" not in first


def test_a_short_conversation_has_no_earlier_messages_to_load(client, conversation, user):
    client.force_login(user)
    long_transcript(conversation, 100)
    html = page_of(client, conversation)
    assert shown_texts(html) == list(range(100))
    assert "Load earlier messages" not in html


def test_earlier_messages_are_only_the_owners_and_a_bad_place_is_refused(
    client, conversation, other_user
):
    long_transcript(conversation, 120)
    earlier = reverse("chat:earlier_messages", args=[conversation.pk])
    client.force_login(other_user)
    assert client.get(earlier, {"before": 20}).status_code == 404
    client.force_login(conversation.owner)
    assert client.get(earlier, {"before": "x"}).status_code == 400
    assert client.get(earlier, {"before": str(10**30)}).status_code == 200


def test_a_call_on_an_earlier_page_shows_its_result(client, conversation, user):
    tool_turns(conversation, [("early", "41")])
    long_transcript(conversation, 150)
    earlier = reverse("chat:earlier_messages", args=[conversation.pk])
    client.force_login(user)
    page = client.get(earlier, {"before": 53}).content.decode()
    [card] = cards(page)
    assert "41" in card and "Running" not in card
