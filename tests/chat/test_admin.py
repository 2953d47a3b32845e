"""The operators' admin: a readable transcript, search over message text, the "waiting for an
answer" filter and the JSON export, for staff only."""

import json

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from chat import services
from chat.blocks import ActionBlock
from chat.models import Conversation
from questions import resolving as questions
from questions.payloads import Answer
from tests.factories import add_message

# Also run on PostgreSQL (make test): the admin's search of the stored JSON differs by backend.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

CHANGELIST = "admin:chat_conversation_changelist"
TRANSCRIPT = "admin:chat_conversation_transcript"


@pytest.fixture
def operator(client, django_user_model):
    staff = django_user_model.objects.create_superuser(username="op", password="pw-op-12345")
    client.force_login(staff)
    return client


@pytest.fixture
def asked(conversation, user, model, post):
    model.asks(
        arguments={
            "header": "Pizza",
            "question": "Which **pizza** for zanzibar?",
            "options": [{"label": "Margherita"}, {"label": "Funghi"}],
        }
    )
    post(user, conversation, "Order lunch")
    return conversation


def change_page(client, conversation) -> str:
    url = reverse("admin:chat_conversation_change", args=[conversation.pk])
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_a_pending_question_is_a_card_with_its_status_and_the_raw_json(operator, asked):
    html = change_page(operator, asked)
    assert 'class="parley-question parley-question-asked"' in html
    assert '<span class="parley-badge">Pending</span>' in html
    # Tool-provided text is escaped, never markdown.
    assert "Which **pizza** for zanzibar?" in html
    assert "<summary>Raw JSON</summary>" in html
    assert "&quot;questionResolution&quot;: &quot;asked&quot;" in html


def test_an_answered_question_shows_its_answer_and_who_answered(operator, asked, user, committed):
    with committed():
        questions.answer_question(
            user=user,
            conversation_id=asked.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Funghi"])],
        )
    html = change_page(operator, asked)
    assert '<span class="parley-badge">Answered</span>' in html
    assert '<li class="parley-chosen">Funghi</li>' in html
    assert "<dt>Answered by</dt><dd>ada</dd>" in html
    assert "<dt>Answered via</dt><dd>browser</dd>" in html


def test_audit_fields_in_the_stored_json_are_shown(operator, conversation):
    block = ActionBlock(
        action_type="question_request",
        status="denied",
        extra={
            "toolCallId": "q9",
            "toolName": "question",
            "questions": [{"question": "Deploy now?", "options": []}],
            "questionResolution": "expired",
            "answeredBy": "ada",
            "answeredAt": "2026-11-26T07:00:00+00:00",
            "answeredVia": "expiry",
        },
    )
    conversation.messages.create(
        role="assistant", order=1, blocks=[block.model_dump(mode="json")], created_seq=1, seq=1
    )
    html = change_page(operator, conversation)
    assert '<span class="parley-badge">Expired</span>' in html
    assert "Deploy now?" in html
    assert "<dt>Answered by</dt><dd>ada</dd>" in html
    assert "<dt>Answered via</dt><dd>expiry</dd>" in html
    assert "<dt>Answered at</dt><dd>Nov. 26, 2026, 7 a.m.</dd>" in html


def test_odd_audit_values_never_break_the_page(operator, conversation):
    extra = {
        "toolCallId": "q9",
        "toolName": "question",
        "questions": [{"question": "Deploy now?"}],
        "questionResolution": "replied",
        "answeredAt": "2026-13-45T99:00:00",
        "answeredBy": None,
        "answeredVia": ["api"],
    }
    block = {"type": "action", "action_type": "question_request", "status": "x", "extra": extra}
    conversation.messages.create(role="assistant", order=1, blocks=[block], created_seq=1, seq=1)
    html = change_page(operator, conversation)
    assert "<dt>Answered at</dt><dd>2026-13-45T99:00:00</dd>" in html
    assert "<dt>Answered by</dt><dd>—</dd>" in html


def test_assistant_markdown_is_rendered_and_sanitised(operator, conversation):
    text = "Some **bold** <script>alert(1)</script> [x](javascript:alert(1))"
    conversation.messages.create(
        role="assistant", order=1, blocks=[{"type": "text", "text": text}], created_seq=1, seq=1
    )
    html = change_page(operator, conversation)
    assert "<strong>bold</strong>" in html
    assert "<script>alert(1)</script>" not in html
    assert 'href="javascript:' not in html


def test_search_finds_a_word_of_a_pending_question(operator, asked, user):
    services.create_conversation(owner=user, title="Unrelated")
    response = operator.get(reverse(CHANGELIST), {"q": "zanzibar"})
    assert list(response.context["cl"].result_list) == [asked]


def test_search_finds_words_beyond_ascii(operator, conversation, user):
    services.create_conversation(owner=user, title="Unrelated")
    conversation.messages.create(
        role="assistant",
        order=1,
        blocks=[{"type": "text", "text": "我们订披萨吧, São Paulo"}],
        created_seq=1,
        seq=1,
    )
    for word in ["披萨", "são"]:
        response = operator.get(reverse(CHANGELIST), {"q": word})
        assert list(response.context["cl"].result_list) == [conversation], word


def test_waiting_for_an_answer_filter(operator, asked, user):
    idle = services.create_conversation(owner=user, title="Idle one")
    waiting = operator.get(reverse(CHANGELIST), {"waiting": "yes"}).context["cl"].result_list
    others = operator.get(reverse(CHANGELIST), {"waiting": "no"}).context["cl"].result_list
    assert list(waiting) == [asked]
    assert list(others) == [idle]


def export(client, *conversations):
    return client.post(
        reverse(CHANGELIST),
        {"action": "export_json", "_selected_action": [c.pk for c in conversations]},
    )


def test_export_downloads_the_selected_conversations_with_their_messages(operator, asked, user):
    services.create_conversation(owner=user, title="Not selected")
    response = export(operator, asked)
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    data = json.loads(response.content)
    [exported] = data["conversations"]
    assert (exported["id"], exported["owner"], exported["agentState"]) == (
        asked.pk,
        "ada",
        "awaiting_user",
    )
    blocks = [b for m in exported["messages"] for b in m["blocks"]]
    assert any(
        b.get("extra", {}).get("questionText") == "Which **pizza** for zanzibar?" for b in blocks
    )


def test_export_is_for_staff_only(client, conversation, user, django_user_model):
    client.force_login(user)  # not staff
    response = export(client, conversation)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    # Staff without permission to view conversations: no export either.
    staff = django_user_model.objects.create_user(username="clerk", password="pw", is_staff=True)
    client.force_login(staff)
    assert export(client, conversation).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    assert json.loads(export(client, conversation).content)["conversations"][0]["id"] == (
        conversation.pk
    )
    assert Conversation.objects.count() == 1


@pytest.fixture
def long_conversation(conversation):
    """130 messages, "text 0 end" to "text 129 end" (orders 0 to 129)."""
    for n in range(130):
        add_message(conversation.pk, f"text {n} end")
    return conversation


def shown_texts(html: str) -> list[int]:
    return [n for n in range(130) if f"<p>text {n} end</p>" in html]


def transcript_page(client, conversation, **place):
    return client.get(reverse(TRANSCRIPT, args=[conversation.pk]), place)


def test_the_change_page_shows_the_newest_100_messages_and_links_to_earlier_ones(
    operator, long_conversation
):
    html = change_page(operator, long_conversation)
    assert shown_texts(html) == list(range(30, 130))
    assert "Messages #30 to #129 of 130." in html
    earlier = reverse(TRANSCRIPT, args=[long_conversation.pk]) + "?before=30"
    assert f'<a href="{earlier}">Earlier messages</a>' in html
    assert "Later messages" not in html


def test_a_short_transcript_is_shown_whole_without_page_links(operator, conversation):
    for n in range(3):
        add_message(conversation.pk, f"text {n} end")
    html = change_page(operator, conversation)
    assert shown_texts(html) == [0, 1, 2]
    assert "Earlier messages" not in html and "Messages #" not in html


def test_earlier_and_later_pages_of_the_transcript(operator, long_conversation):
    earlier = transcript_page(operator, long_conversation, before=30)
    assert earlier.status_code == 200
    html = earlier.content.decode()
    assert shown_texts(html) == list(range(30))
    assert "Earlier messages" not in html
    later_url = reverse(TRANSCRIPT, args=[long_conversation.pk]) + "?after=29"
    assert f'<a href="{later_url}">Later messages</a>' in html
    change_url = reverse("admin:chat_conversation_change", args=[long_conversation.pk])
    assert f'<a href="{change_url}">Back to the conversation' in html

    middle = transcript_page(operator, long_conversation, after=9).content.decode()
    assert shown_texts(middle) == list(range(10, 110))
    assert "Messages #10 to #109 of 130." in middle
    assert "?before=10" in middle and "?after=109" in middle
    newest = transcript_page(operator, long_conversation, after=29).content.decode()
    assert shown_texts(newest) == list(range(30, 130))
    assert "Later messages" not in newest


@pytest.mark.parametrize(
    "place",
    [
        {"before": "abc"},
        {"before": "-1"},
        {"before": "²"},
        {"before": "1" * 5000},
        {"before": "130"},  # no message there
        {"after": ""},
        {"before": "5", "after": "7"},
    ],
)
def test_a_page_of_the_transcript_at_no_message_is_404_not_500(operator, long_conversation, place):
    assert transcript_page(operator, long_conversation, **place).status_code == 404


def test_pages_of_the_transcript_are_for_staff_who_may_view_conversations(
    client, conversation, user, django_user_model
):
    add_message(conversation.pk, "text 0 end")
    client.force_login(user)  # not staff
    response = transcript_page(client, conversation, before=0)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    staff = django_user_model.objects.create_user(username="clerk", password="pw", is_staff=True)
    client.force_login(staff)
    assert transcript_page(client, conversation, before=0).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    assert transcript_page(client, conversation, after=0).status_code == 200
    assert client.get(reverse(TRANSCRIPT, args=[conversation.pk + 1])).status_code == 404


def test_the_export_stays_whole_however_long_the_transcript(operator, long_conversation):
    [exported] = json.loads(export(operator, long_conversation).content)["conversations"]
    assert [m["order"] for m in exported["messages"]] == list(range(130))


def test_superseded_messages_are_marked(operator, conversation, user, post, committed):
    old = post(user, conversation, "old words")
    with committed():
        services.edit_message(
            user=user, conversation_id=conversation.pk, message_id=old.pk, text="new words"
        )
    html = change_page(operator, conversation)
    articles = html.split('<article class="parley-message ')[1:]
    marked = [
        a
        for a in articles
        if a.startswith(("parley-user parley-superseded", "parley-assistant parley-superseded"))
    ]
    assert len(marked) == 2 and "old words" in marked[0]
    assert all("Superseded</span>" in a for a in marked)
    assert not any(
        "Superseded</span>" in a for a in articles if "new words" in a.split("</article>")[0]
    )
