"""Regenerate the last reply and edit-and-resend any message that asked something: the old branch is
kept (superseded), the model and the page see only the new one."""

import pytest
from django.urls import reverse

from chat import selectors, services
from chat.blocks import NoticeBlock, TextBlock, parse_blocks
from chat.engine.runtime import build_history
from chat.errors import (
    AgentBusy,
    ConversationNotFound,
    MessageNotEditable,
    NothingToRegenerate,
    QuestionPending,
)
from chat.models import AgentState, Conversation, Message, Role


def shown(conversation):
    return [
        (m.role, "".join(b.text for b in parse_blocks(m.blocks) if isinstance(b, TextBlock)))
        for m in conversation.messages.filter(superseded=False).order_by("order")
    ]


def user_texts_in_history(conversation):
    return [
        block.text
        for message in build_history(conversation.pk)
        if message.role == "user"
        for block in message.blocks
    ]


@pytest.mark.django_db
def test_regenerate_supersedes_the_last_reply_and_runs_a_new_one(
    conversation, user, post, committed
):
    post(user, conversation, "first")
    post(user, conversation, "second")
    old_reply = conversation.messages.order_by("-order").first()

    with committed():
        services.regenerate_reply(user=user, conversation_id=conversation.pk)

    old_reply.refresh_from_db()
    assert old_reply.superseded
    roles = [role for role, _ in shown(conversation)]
    assert roles == [Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT]
    new_reply = conversation.messages.filter(superseded=False).order_by("-order").first()
    assert new_reply.pk != old_reply.pk
    assert "(message 2 of this chat)" in shown(conversation)[-1][1]
    # Kept: the old reply's text is still stored.
    assert Message.objects.filter(pk=old_reply.pk).exists()
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE


@pytest.mark.django_db
def test_edit_replaces_the_last_message_and_the_model_sees_only_the_new_text(
    conversation, user, post, committed
):
    post(user, conversation, "hello")
    old = post(user, conversation, "typo here")

    with committed():
        new = services.edit_message(
            user=user, conversation_id=conversation.pk, message_id=old.pk, text="  fixed text "
        )

    old.refresh_from_db()
    assert old.superseded
    assert new.order > old.order
    assert user_texts_in_history(conversation) == ["hello", "fixed text"]
    reply = shown(conversation)[-1]
    assert reply[0] == Role.ASSISTANT
    assert "You said: “fixed text” (message 2 of this chat)" in reply[1]
    superseded = conversation.messages.filter(superseded=True).order_by("order")
    assert [m.role for m in superseded] == [Role.USER, Role.ASSISTANT]


@pytest.mark.django_db
def test_an_earlier_message_can_be_edited_and_what_followed_it_is_superseded(user, post, committed):
    conversation = services.create_conversation(owner=user)
    first = post(user, conversation, "one")
    post(user, conversation, "two")
    conversation.refresh_from_db()
    assert conversation.title == "one"
    with committed():
        services.edit_message(
            user=user, conversation_id=conversation.pk, message_id=first.pk, text="uno"
        )
    assert user_texts_in_history(conversation) == ["uno"]
    assert [role for role, _ in shown(conversation)] == [Role.USER, Role.ASSISTANT]
    assert conversation.messages.filter(superseded=True).count() == 4
    # The title was the one given from the first message: it follows the edit.
    conversation.refresh_from_db()
    assert conversation.title == "uno"


@pytest.mark.django_db
def test_an_edited_first_message_keeps_a_title_the_user_chose(conversation, user, post):
    first = post(user, conversation, "one")
    services.rename_conversation(user=user, conversation_id=conversation.pk, title="Mine")
    services.edit_message(
        user=user, conversation_id=conversation.pk, message_id=first.pk, text="uno"
    )
    conversation.refresh_from_db()
    assert conversation.title == "Mine"


@pytest.mark.django_db
def test_a_superseded_or_assistant_message_cannot_be_edited(conversation, user, post, committed):
    first = post(user, conversation, "one")
    with committed():
        services.edit_message(
            user=user, conversation_id=conversation.pk, message_id=first.pk, text="uno"
        )
    reply = conversation.messages.filter(role=Role.ASSISTANT, superseded=False).get()
    before = list(conversation.messages.values_list("pk", "superseded"))
    for message_id in (first.pk, reply.pk):
        with pytest.raises(MessageNotEditable):
            services.edit_message(
                user=user, conversation_id=conversation.pk, message_id=message_id, text="x"
            )
    assert list(conversation.messages.values_list("pk", "superseded")) == before


@pytest.mark.django_db
def test_nothing_to_regenerate_before_the_first_message(conversation, user):
    with pytest.raises(NothingToRegenerate):
        services.regenerate_reply(user=user, conversation_id=conversation.pk)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("state", "error"),
    [(AgentState.LLM_REQUESTING, AgentBusy), (AgentState.AWAITING_USER, QuestionPending)],
)
def test_regenerate_and_edit_are_refused_while_a_turn_runs_or_waits(
    conversation, user, post, state, error
):
    message = post(user, conversation, "hi")
    Conversation.objects.filter(pk=conversation.pk).update(agent_state=state)
    with pytest.raises(error):
        services.regenerate_reply(user=user, conversation_id=conversation.pk)
    with pytest.raises(error):
        services.edit_message(
            user=user, conversation_id=conversation.pk, message_id=message.pk, text="hey"
        )
    assert not conversation.messages.filter(superseded=True).exists()


@pytest.mark.django_db
def test_another_users_conversation_cannot_be_regenerated(conversation, user, other_user, post):
    post(user, conversation, "hi")
    with pytest.raises(ConversationNotFound):
        services.regenerate_reply(user=other_user, conversation_id=conversation.pk)
    assert not conversation.messages.filter(superseded=True).exists()


@pytest.mark.django_db
def test_a_refused_edit_is_shown_in_the_edit_forms_alert(client, conversation, user, post):
    client.force_login(user)
    post(user, conversation, "one")
    Conversation.objects.filter(pk=conversation.pk).update(agent_state=AgentState.AWAITING_USER)
    message = conversation.messages.get(role=Role.USER)
    response = client.post(
        reverse("chat:edit_message", args=[conversation.pk, message.pk]),
        {"text": "changed"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 409
    assert response["HX-Retarget"] == f"#edit-alert-{message.pk}"
    assert "answer or reject the question first" in response.content.decode()


@pytest.mark.django_db
def test_the_page_shows_the_new_branch_and_the_controls(
    client, conversation, user, post, committed
):
    client.force_login(user)
    old = post(user, conversation, "old words")
    with committed():
        services.edit_message(
            user=user, conversation_id=conversation.pk, message_id=old.pk, text="new words"
        )
    page = client.get(reverse("chat:conversation_detail", args=[conversation.pk])).content.decode()
    # Only as the older versions (the message, its reply), hidden until asked for.
    assert page.count("old words") == page.count('class="branch-text" hidden') == 2
    assert '<div class="branch-text" hidden><div class="block block-text plain">old words' in page
    assert "new words" in page
    assert "Regenerate reply" in page
    edited = conversation.messages.filter(superseded=False).first()
    assert f'aria-controls="edit-{edited.pk}"' in page


@pytest.mark.django_db
def test_stop_marks_the_reply_stopped(conversation, user, dispatched):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="hi")
    services.stop_turn(user=user, conversation_id=conversation.pk)
    last = conversation.messages.order_by("-order").first()
    assert last.role == Role.SYSTEM
    assert parse_blocks(last.blocks) == [NoticeBlock(message="Stopped")]


@pytest.mark.django_db
@pytest.mark.parametrize("batch", [2, 3, 50])
def test_the_last_turn_includes_its_answered_question_at_any_batch_size(
    conversation, user, post, ask, committed, monkeypatch, batch
):
    """The user's answer to a question is part of the turn that asked it, however the
    backwards read of the transcript splits the turn."""
    from questions import resolving as questions
    from questions.payloads import Answer

    monkeypatch.setattr(selectors, "NEWEST_FIRST_BATCH", batch)
    post(user, conversation, "earlier")
    ask(user, conversation)
    with committed():
        questions.answer_question(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Margherita"])],
        )

    turn = selectors.last_turn(conversation_id=conversation.pk)
    assert turn.prompt_text == "Lunch?"
    assert [m.role for m in turn.after] == [Role.ASSISTANT, Role.USER, Role.TOOL, Role.ASSISTANT]
    assert turn.after[-1] == conversation.messages.order_by("-order").first()


@pytest.mark.django_db
def test_the_last_turn_of_a_long_transcript_is_read_from_its_end(conversation, monkeypatch):
    """Pages show Regenerate and Edit after every turn: what that reads does not grow with
    the transcript."""
    from tests.factories import add_message, count_loaded_messages

    for number in range(200):
        add_message(
            conversation.pk, f"message {number}", role=(Role.USER, Role.ASSISTANT)[number % 2]
        )
    loaded = count_loaded_messages(monkeypatch)
    turn = selectors.last_turn(conversation_id=conversation.pk)
    assert len(loaded) <= selectors.NEWEST_FIRST_BATCH
    assert turn.prompt_text == "message 198"
    assert [m.role for m in turn.after] == [Role.ASSISTANT]


@pytest.mark.django_db
def test_regenerate_and_edit_count_against_the_messages_per_minute(
    client, conversation, user, post, settings, committed, one_minute
):
    """Each costs a model turn and keeps a superseded copy: a flood of them is refused like a
    flood of messages, and the refusal is shown where the person acted."""
    settings.PARLEY_MESSAGES_PER_MINUTE = 3
    client.force_login(user)
    post(user, conversation, "one")  # 1
    regenerate = reverse("chat:regenerate", args=[conversation.pk])
    htmx = {"HX-Request": "true"}
    with committed():  # the turn runs and ends
        assert client.post(regenerate, headers=htmx).status_code == 204  # 2
    message = conversation.messages.get(role=Role.USER, superseded=False)
    edit = reverse("chat:edit_message", args=[conversation.pk, message.pk])
    with committed():
        assert client.post(edit, {"text": "uno"}, headers=htmx).status_code == 204  # 3
    kept = conversation.messages.count()
    refused = client.post(regenerate, headers=htmx)
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert refused["HX-Retarget"] == "#regenerate-alert"
    assert "You sent too many messages in a minute." in refused.content.decode()
    assert client.post(edit, {"text": "eins"}, headers=htmx).status_code == 429
    assert conversation.messages.count() == kept  # nothing superseded, nothing new
