"""What the conversation page shows: tool cards with their results, message times, the
empty state's suggestions, and Send while the agent replies."""

import re

import pytest
from django.urls import reverse

from chat import services
from chat.models import AgentState, Conversation
from chat.providers import suggestions

pytestmark = pytest.mark.django_db(transaction=True)


def page_of(client, conversation) -> str:
    return client.get(reverse("chat:conversation_detail", args=[conversation.pk])).content.decode()


def test_a_tool_call_card_names_its_tool_and_holds_its_result(client, conversation, user):
    client.force_login(user)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="what time is it")
    html = page_of(client, conversation)
    card = re.search(
        r'<details class="block block-tool" id="tool-[^"]+">(.*?)</details>', html, re.S
    )
    assert card is not None
    assert "Used the tool current_time" in card.group(1)
    assert "Tool result" in card.group(1) and "Done" in card.group(1)
    # No separate result card: the tool message itself shows nothing.
    assert html.count('class="block block-tool"') == 2


def test_every_message_has_its_time(client, conversation, user):
    client.force_login(user)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="hello")
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
