"""The question's row (questions.models.Question) follows the question's life: made pending
when the agent asks, resolved once (answered, answered by a message, rejected, expired), and
the block the transcript shows always says what the row says."""

from datetime import timedelta

import pytest

from chat.models import Conversation, Message, Role
from questions import resolving as questions
from questions.errors import QuestionAlreadyResolved
from questions.models import QuestionDraft, QuestionKind, QuestionStatus
from questions.payloads import Answer, payload_of
from questions.schemas import normalise
from questions.selectors import question_for_user
from tests.fakes import PIZZA

# Also run on PostgreSQL (make test): the conditional update that resolves a question.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]

TWO_QUESTIONS = {
    "questions": [
        {"question": "Base?", "header": "Base", "options": [{"label": "Thin"}, {"label": "Deep"}]},
        {
            "question": "Extras?",
            "options": [{"label": "Olives"}, {"label": "Basil"}],
            "multiSelect": True,
        },
    ]
}
CONFIRM = {"action": "Delete 3 files", "details": "They cannot be restored."}


@pytest.fixture
def asked(settings, user, conversation, model, say):
    settings.QUESTION_EXPIRE_AFTER = 60
    settings.QUESTION_REMIND_BEFORE = None
    model.asks()
    say(user, conversation)
    return conversation


@pytest.fixture
def resolve(user, committed, clock, say):
    """Resolve q1 of `conversation` one way or another, as the user (or the server) does."""

    def resolve(conversation, how):
        if how == "message":
            return say(user, conversation, "Surprise me")
        with committed():
            if how == "answer":
                return questions.answer_question(
                    user=user,
                    conversation_id=conversation.pk,
                    tool_call_id="q1",
                    answers=[Answer(labels=["Funghi"])],
                )
            if how == "reject":
                return questions.reject_question(
                    user=user, conversation_id=conversation.pk, tool_call_id="q1"
                )
            assert how == "expiry"
            clock.advance(61)
            [question_id] = conversation.questions.values_list("pk", flat=True)
            assert questions.expire_question(question_id=question_id)
        return None

    return resolve


def snapshot(conversation) -> tuple:
    """Everything a resolution could change: the question's row, the messages, the state."""
    conversation.refresh_from_db()
    return (
        list(conversation.questions.values()),
        list(Message.objects.filter(conversation=conversation).values().order_by("pk")),
        conversation.agent_state,
        conversation.seq,
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "kind"),
    [
        ("question", PIZZA, QuestionKind.QUESTION),
        ("ask_user_question", TWO_QUESTIONS, QuestionKind.ASK_USER_QUESTION),
        ("confirm_action", CONFIRM, QuestionKind.CONFIRM_ACTION),
    ],
)
def test_asking_makes_a_pending_row_with_what_was_asked_and_its_deadlines(
    settings, user, conversation, model, say, row, block_of, tool, arguments, kind
):
    settings.QUESTION_EXPIRE_AFTER = 100
    settings.QUESTION_REMIND_BEFORE = 30
    model.asks(tool, arguments)
    say(user, conversation)
    question = row(conversation)
    assert (question.status, question.is_pending, question.kind) == (
        QuestionStatus.PENDING,
        True,
        kind,
    )
    assert question.key == f"{conversation.pk}-q1"
    # Under the message whose call asked it.
    assert question.message.role == Role.ASSISTANT
    assert [b["id"] for b in question.message.blocks if b["type"] == "tool_call"] == ["q1"]
    # What was asked, normalised, under the wire names.
    assert question.request == normalise(tool, arguments)
    assert question.questions == [
        q.model_dump(mode="json") for q in normalise(tool, arguments).questions
    ]
    assert question.questions[0]["question"] == normalise(tool, arguments).questions[0].text
    assert question.expires_at == question.created_at + timedelta(seconds=100)
    assert question.remind_at == question.expires_at - timedelta(seconds=30)
    assert question.reminded_at is None
    # Nothing resolved it yet.
    assert (question.answers, question.answer_text, question.reply) == (None, "", None)
    assert (question.answered_by, question.answered_at, question.answered_via) == (None, None, "")
    assert block_of(question) == question.block
    assert payload_of(question.block).question_resolution == "asked"


def test_a_question_that_never_expires_has_no_deadlines(
    settings, user, conversation, model, say, row
):
    settings.QUESTION_EXPIRE_AFTER = None
    model.asks()
    say(user, conversation)
    question = row(conversation)
    assert (question.expires_at, question.remind_at) == (None, None)


def test_answering_records_the_answer_who_when_and_how(user, asked, resolve, row, block_of):
    reply = resolve(asked, "answer")
    question = row(asked)
    assert question.status == QuestionStatus.ANSWERED
    assert (question.answered_by, question.answered_via) == (user, "browser")
    assert question.answered_at >= question.created_at
    assert question.answers == [{"labels": ["Funghi"], "custom": ""}]
    assert question.answer_text == "Funghi"
    assert question.reply == reply  # the inserted user message
    assert block_of(question) == question.block
    payload = payload_of(question.block)
    assert (payload.question_resolution, payload.answered_by) == ("replied", "ada")
    assert payload.answer_message_id == str(reply.pk)


def test_a_message_instead_records_it_as_the_answer(user, asked, resolve, row, block_of):
    message = resolve(asked, "message")
    question = row(asked)
    assert question.status == QuestionStatus.AUTO_RESOLVED
    assert (question.answered_by, question.answered_via) == (user, "auto-resolve")
    assert question.answered_at is not None
    assert question.answers is None  # no option was chosen
    assert (question.answer_text, question.reply) == ("Surprise me", message)
    assert block_of(question) == question.block
    payload = payload_of(question.block)
    assert (payload.question_resolution, payload.answer_text) == ("replied", "Surprise me")


def test_rejecting_records_who_and_how_and_no_answer(user, asked, resolve, row, block_of):
    resolve(asked, "reject")
    question = row(asked)
    assert question.status == QuestionStatus.REJECTED
    assert (question.answered_by, question.answered_via) == (user, "browser")
    assert question.answered_at is not None
    assert (question.answers, question.answer_text, question.reply) == (None, "", None)
    assert block_of(question) == question.block
    assert payload_of(question.block).question_resolution == "rejected"


def test_expiry_records_nobody_and_no_answer(asked, resolve, row, block_of):
    resolve(asked, "expiry")
    question = row(asked)
    assert question.status == QuestionStatus.EXPIRED
    assert (question.answered_by, question.answered_via) == (None, "expiry")
    assert question.answered_at >= question.expires_at
    assert (question.answers, question.answer_text, question.reply) == (None, "", None)
    assert block_of(question) == question.block
    assert payload_of(question.block).question_resolution == "expired"


@pytest.mark.parametrize("first", ["answer", "message", "reject", "expiry"])
def test_a_second_resolution_is_refused_and_changes_nothing(user, asked, resolve, row, first):
    resolve(asked, first)
    before = snapshot(asked)
    with pytest.raises(QuestionAlreadyResolved):
        questions.answer_question(
            user=user,
            conversation_id=asked.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Pepperoni"])],
        )
    with pytest.raises(QuestionAlreadyResolved):
        questions.reject_question(user=user, conversation_id=asked.pk, tool_call_id="q1")
    assert not questions.expire_question(question_id=row(asked).pk)
    assert snapshot(asked) == before


@pytest.mark.parametrize("second", ["answer", "reject"])
def test_a_resolution_that_read_the_row_before_another_won_changes_nothing(
    user, asked, resolve, row, monkeypatch, second
):
    """Two requests read the question while it is pending; the first one's resolution
    commits, then the second's conditional update of the row finds it resolved: it is
    refused, and what it had written already (an answer's message) is undone."""
    stale = question_for_user(user=user, conversation_id=asked.pk, tool_call_id="q1", lock=True)
    resolve(asked, "message")
    before = snapshot(asked)
    assert stale.is_pending  # as the second request still sees it
    # The transcript's next place is the conversation's, which its lock keeps current.
    stale.conversation.message_count = Conversation.objects.get(pk=asked.pk).message_count
    monkeypatch.setattr(questions, "question_for_user", lambda **kwargs: stale)
    with pytest.raises(QuestionAlreadyResolved):
        if second == "answer":
            questions.answer_question(
                user=user,
                conversation_id=asked.pk,
                tool_call_id="q1",
                answers=[Answer(labels=["Pepperoni"])],
            )
        else:
            questions.reject_question(user=user, conversation_id=asked.pk, tool_call_id="q1")
    assert snapshot(asked) == before
    assert row(asked).status == QuestionStatus.AUTO_RESOLVED


@pytest.mark.parametrize("how", ["answer", "message", "reject", "expiry"])
def test_every_resolution_deletes_the_draft(user, asked, resolve, row, committed, how):
    with committed():
        draft = questions.save_draft(
            user=user,
            conversation_id=asked.pk,
            tool_call_id="q1",
            answers=[Answer(custom="Calzone")],
        )
    assert draft.question == row(asked)
    resolve(asked, how)
    assert not QuestionDraft.objects.exists()
