import json
import re

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings as django_settings
from django.db import transaction

from chat import services
from chat.blocks import ErrorBlock, TextBlock, ToolCallBlock, ToolResultBlock, parse_blocks
from chat.engine import runtime, turns
from chat.engine.providers.base import ToolCallRequest
from chat.engine.runtime import build_history
from chat.engine.turns import Lease
from chat.errors import ConversationNotFound
from chat.models import AgentState, Conversation, Message, Role
from chat.transcript import Transcript, lock
from questions import answers, asking
from questions import resolving as questions
from questions.errors import InvalidAnswer, QuestionAlreadyResolved
from questions.models import Question
from questions.payloads import Answer, payload_of
from questions.schemas import normalise
from questions.selectors import pending_question, question_for_user
from questions.tools import INVALID_QUESTION, QuestionTool
from tests.factories import add_message
from tests.fakes import PIZZA

TOO_LONG_ANSWER = "x" * (django_settings.PARLEY_MAX_MESSAGE_CHARS + 1)

# Also run on PostgreSQL (make test): resolutions lock the conversation and update the row.
pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


@pytest.fixture
def start(say):
    """The user asks for lunch; the agent's turn runs (and asks, when the model does)."""

    def start(conversation, user, text="Order lunch"):
        return say(user, conversation, text)

    return start


@pytest.fixture
def answer(committed):
    """Answer q1 (or `call`) and let the resumed turn run to its end."""

    def answer(conversation, user, *answers, call="q1"):
        with committed():
            reply = questions.answer_question(
                user=user,
                conversation_id=conversation.pk,
                tool_call_id=call,
                answers=list(answers),
            )
        conversation.refresh_from_db()
        return reply

    return answer


def question_block(conversation):
    for message in conversation.messages.filter(role=Role.ASSISTANT).order_by("-order"):
        for block in parse_blocks(message.blocks):
            if block.type == "action":
                return message, block
    raise AssertionError("no question block")


def results(conversation):
    return [
        b
        for m in conversation.messages.order_by("order")
        for b in parse_blocks(m.blocks)
        if isinstance(b, ToolResultBlock)
    ]


def assert_history_valid(conversation):
    history = build_history(conversation.pk)
    for index, message in enumerate(history):
        calls = [b.id for b in message.blocks if isinstance(b, ToolCallBlock)]
        if calls:
            assert [b.tool_call_id for b in history[index + 1].blocks] == calls


def test_asking_pauses_with_a_pending_block_under_the_asking_message(
    conversation, user, model, start
):
    model.asks()
    start(conversation, user)
    assert conversation.agent_state == AgentState.AWAITING_USER
    assert conversation.lease_owner == ""  # the runner let go while it waits
    message, block = question_block(conversation)
    assert [b.type for b in parse_blocks(message.blocks)] == ["tool_call", "action"]
    assert (block.action_type, block.status) == ("question_request", "pending")
    # The stored JSON is the question contract: its field names, as they are on the wire.
    extra = block.extra
    assert extra["toolCallId"] == "q1"
    assert extra["questionHeader"] == "Pizza"
    assert extra["questionText"] == "Which pizza?"
    assert extra["questionOptions"][0] == {
        "label": "Margherita",
        "description": "Tomato, mozzarella",
    }
    assert (extra["questionMultiple"], extra["questionCustom"]) == (False, True)
    assert (extra["questionResolution"], extra["needsUserAction"]) == ("asked", True)
    assert "answerText" not in extra
    assert results(conversation) == []  # no result until the user resolves it
    assert len(model.histories) == 1  # nothing runs while it waits


def test_picking_an_option_inserts_the_label_and_resumes(conversation, user, model, start, answer):
    model.asks()
    start(conversation, user)
    reply = answer(conversation, user, Answer(labels=["Pepperoni"]))
    conversation.refresh_from_db()
    # The contract's inserted message: in the data (and the API), shown by the block instead.
    assert parse_blocks(reply.blocks) == [TextBlock(text="Pepperoni", shown_elsewhere=True)]
    _, block = question_block(conversation)
    assert block.status == "success"
    question = payload_of(block)
    assert (question.question_resolution, question.needs_user_action) == ("replied", False)
    assert (question.answer_text, question.answer_message_id) == ("Pepperoni", str(reply.pk))
    assert question.answers == [Answer(labels=["Pepperoni"])]
    # The result names the inserted message, so the model reads the answer once.
    assert results(conversation) == [
        ToolResultBlock(
            tool_call_id="q1", content="Pepperoni", reply_message_id=reply.pk, shown_elsewhere=True
        )
    ]
    assert conversation.agent_state == AgentState.IDLE
    last = conversation.messages.order_by("order").last()
    assert parse_blocks(last.blocks) == [TextBlock(text="Thanks: Pepperoni")]
    assert_history_valid(conversation)
    # The answer reached the model once: as the tool result, not again as a user message.
    assert [m.role for m in model.histories[-1]] == ["user", "assistant", "tool"]


def test_several_labels_one_per_line_and_custom_text_last(conversation, user, model, start, answer):
    model.asks(arguments={**PIZZA, "multiple": True})
    start(conversation, user)
    reply = answer(
        conversation, user, Answer(labels=["Funghi", "Margherita"], custom="  and a salad ")
    )
    [text] = parse_blocks(reply.blocks)
    assert text.text == "Funghi\nMargherita\nand a salad"
    assert results(conversation)[0].content == "Funghi\nMargherita\nand a salad"


def test_typed_text_answers_a_single_choice_or_free_form_question(
    conversation, user, model, start, answer
):
    model.asks(arguments={"question": "Project name?"})
    start(conversation, user)
    reply = answer(conversation, user, Answer(custom="Apollo"))
    assert [b.text for b in parse_blocks(reply.blocks)] == ["Apollo"]
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE


def test_an_ordinary_message_answers_the_pending_question(conversation, user, model, start):
    model.asks()
    start(conversation, user)
    message = start(conversation, user, "Surprise me")
    _, block = question_block(conversation)
    assert block.status == "success"
    question = payload_of(block)
    assert (question.answer_text, question.answer_message_id) == ("Surprise me", str(message.pk))
    user_messages = conversation.messages.filter(role=Role.USER)
    assert [parse_blocks(m.blocks)[0].text for m in user_messages] == ["Order lunch", "Surprise me"]
    assert results(conversation) == [
        ToolResultBlock(
            tool_call_id="q1",
            content="Surprise me",
            reply_message_id=message.pk,
            shown_elsewhere=True,
        )
    ]
    assert conversation.agent_state == AgentState.IDLE
    assert_history_valid(conversation)


def test_rejecting_inserts_nothing_stops_and_the_model_later_learns_it(
    conversation, user, model, start
):
    model.asks()
    start(conversation, user)
    questions.reject_question(user=user, conversation_id=conversation.pk, tool_call_id="q1")
    conversation.refresh_from_db()
    _, block = question_block(conversation)
    question = payload_of(block)
    assert (block.status, question.question_resolution) == ("denied", "rejected")
    assert question.needs_user_action is False
    assert conversation.agent_state == AgentState.IDLE
    assert conversation.messages.filter(role=Role.USER).count() == 1
    [result] = results(conversation)
    assert (result.content, result.is_error) == (answers.DECLINED, True)
    assert len(model.histories) == 1  # the agent stopped

    start(conversation, user, "Never mind")
    assert model.histories[-1][2].blocks == [result]
    assert_history_valid(conversation)


@pytest.mark.parametrize("first", ["answer", "reject", "message"])
def test_only_the_first_resolution_counts(conversation, user, model, first, start, committed):
    model.asks()
    start(conversation, user)
    answer = Answer(labels=["Funghi"])
    with committed():
        if first == "answer":
            questions.answer_question(
                user=user, conversation_id=conversation.pk, tool_call_id="q1", answers=[answer]
            )
        elif first == "reject":
            questions.reject_question(user=user, conversation_id=conversation.pk, tool_call_id="q1")
        else:
            services.post_user_message(
                user=user, conversation_id=conversation.pk, text="Funghi please"
            )
    snapshot = list(Message.objects.values_list("pk", "version").order_by("pk"))

    with pytest.raises(QuestionAlreadyResolved):
        questions.answer_question(
            user=user, conversation_id=conversation.pk, tool_call_id="q1", answers=[answer]
        )
    with pytest.raises(QuestionAlreadyResolved):
        questions.reject_question(user=user, conversation_id=conversation.pk, tool_call_id="q1")
    assert list(Message.objects.values_list("pk", "version").order_by("pk")) == snapshot
    assert len(results(conversation)) == 1


def test_a_stale_or_unknown_tool_call_id_changes_nothing(conversation, user, model, start):
    model.asks()
    start(conversation, user)
    with pytest.raises(QuestionAlreadyResolved):
        questions.answer_question(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id="q0",
            answers=[Answer(labels=["Funghi"])],
        )
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.AWAITING_USER
    assert question_block(conversation)[1].status == "pending"


@pytest.mark.parametrize(
    ("arguments", "answer", "message"),
    [
        (PIZZA, Answer(labels=["Hawaiian"]), answers.NOT_AN_OPTION),
        (PIZZA, Answer(labels=["Funghi", "Pepperoni"]), answers.ONE_CHOICE),
        ({**PIZZA, "custom": False}, Answer(custom="Hawaiian"), answers.OPTIONS_ONLY),
        (PIZZA, Answer(custom="   "), answers.EMPTY),
        (PIZZA, Answer(labels=["Funghi"], custom="and olives"), answers.CHOICE_OR_TYPED),
        (PIZZA, Answer(custom=TOO_LONG_ANSWER), answers.TOO_LONG),
    ],
)
def test_invalid_answers_are_refused_and_the_question_stays_open(
    conversation, user, model, arguments, answer, message, start
):
    model.asks(arguments=arguments)
    start(conversation, user)
    with pytest.raises(InvalidAnswer, match=re.escape(str(message))):
        questions.answer_question(
            user=user, conversation_id=conversation.pk, tool_call_id="q1", answers=[answer]
        )
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.AWAITING_USER
    assert conversation.messages.filter(role=Role.USER).count() == 1


def test_another_user_cannot_answer_or_reject(conversation, user, other_user, model, start):
    model.asks()
    start(conversation, user)
    with pytest.raises(ConversationNotFound):
        questions.answer_question(
            user=other_user,
            conversation_id=conversation.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["Funghi"])],
        )
    with pytest.raises(ConversationNotFound):
        questions.reject_question(
            user=other_user, conversation_id=conversation.pk, tool_call_id="q1"
        )
    assert question_block(conversation)[1].status == "pending"


def test_ask_user_question_returns_answers_by_question_text(
    conversation, user, model, start, answer
):
    model.asks(
        "ask_user_question",
        {
            "questions": [
                {
                    "question": "Database?",
                    "header": "DB",
                    "options": [{"label": "PG"}, {"label": "SQLite"}],
                },
                {
                    "question": "Features?",
                    "options": [{"label": "Search"}, {"label": "Export"}],
                    "multiSelect": True,
                },
            ]
        },
    )
    start(conversation, user)
    reply = answer(
        conversation, user, Answer(labels=["SQLite"]), Answer(labels=["Search", "Export"])
    )
    assert parse_blocks(reply.blocks)[0].text == "DB: SQLite\nFeatures?: Search, Export"
    assert json.loads(results(conversation)[0].content) == {
        "answers": {"Database?": "SQLite", "Features?": ["Search", "Export"]}
    }


@pytest.mark.parametrize(("label", "confirmed"), [("Yes", True), ("No", False)])
def test_confirm_action_tells_the_model_whether_it_was_confirmed(
    conversation, user, model, label, confirmed, start, answer
):
    model.asks("confirm_action", {"action": "Delete 3 files"})
    start(conversation, user)
    answer(conversation, user, Answer(labels=[label]))
    assert json.loads(results(conversation)[0].content) == {"confirmed": confirmed}


def test_a_message_instead_of_yes_or_no_is_passed_to_the_model_to_decide(
    conversation, user, model, start
):
    model.asks("confirm_action", {"action": "Delete 3 files"})
    start(conversation, user)
    start(conversation, user, "Only the logs")
    assert json.loads(results(conversation)[0].content) == {
        "confirmed": None,
        "userReply": "Only the logs",
    }
    assert conversation.agent_state == AgentState.IDLE


def test_a_message_while_no_question_is_pending_resolves_nothing(conversation, user, model, start):
    """The pausing call's tool is asked to take a message as the answer to a question that is
    no longer pending: it declines, and the caller keeps the pause open."""
    model.asks()
    start(conversation, user)
    Question.objects.update(status="cancelled")
    [call] = turns.open_tool_calls(conversation)
    with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
        reply = transcript.append(role=Role.USER, blocks=[TextBlock(text="Funghi")])
        assert (
            questions.auto_resolve_question(transcript, call=call, reply=reply, user=user) is None
        )
    assert results(conversation) == []


def test_asking_in_a_conversation_that_is_gone_is_refused(conversation, user):
    call = ToolCallBlock(id="q1", name="question", arguments=PIZZA)
    request = normalise("question", PIZZA)
    with pytest.raises(ConversationNotFound):
        asking.ask(Lease(conversation_id=conversation.pk + 1000, token=1), call, request, limit=3)
    assert not Question.objects.exists()


def test_a_question_with_other_calls_is_refused_under_the_standalone_policy(
    conversation, user, model, start
):
    model.asks(also=[ToolCallRequest("c0", "calculate", {"expression": "1+1"})])
    start(conversation, user)
    conversation.refresh_from_db()
    # Not paused: both calls got an error result, the user saw why, the model went on.
    assert conversation.agent_state == AgentState.IDLE
    assert {r.tool_call_id for r in results(conversation)} == {"c0", "q1"}
    assert all(r.is_error for r in results(conversation))
    errors = [
        b
        for m in conversation.messages.all()
        for b in parse_blocks(m.blocks)
        if isinstance(b, ErrorBlock)
    ]
    assert len(errors) == 1
    assert "together with other tool calls" in errors[0].message
    assert not any(
        b.type == "action" for m in conversation.messages.all() for b in parse_blocks(m.blocks)
    )
    assert_history_valid(conversation)


def test_sequential_policy_runs_calls_around_the_question(
    conversation, user, model, settings, start, answer
):
    settings.QUESTION_CALL_POLICY = "sequential"
    before = ToolCallRequest("c0", "calculate", {"expression": "1+1"})
    after = ToolCallRequest("c2", "calculate", {"expression": "2+2"})
    model.responses.append([before, ToolCallRequest("q1", "question", PIZZA), after])
    start(conversation, user)
    assert conversation.agent_state == AgentState.AWAITING_USER
    assert [r.tool_call_id for r in results(conversation)] == ["c0"]
    answer(conversation, user, Answer(labels=["Funghi"]))
    conversation.refresh_from_db()
    assert [r.tool_call_id for r in results(conversation)] == ["c0", "q1", "c2"]
    assert [r.content for r in results(conversation)] == ["2", "Funghi", "4"]
    assert conversation.agent_state == AgentState.IDLE
    assert_history_valid(conversation)


def test_sequential_rejection_gives_the_remaining_calls_a_result(
    conversation, user, model, settings, start
):
    settings.QUESTION_CALL_POLICY = "sequential"
    model.responses.append(
        [
            ToolCallRequest("q1", "question", PIZZA),
            ToolCallRequest("c2", "calculate", {"expression": "2+2"}),
        ]
    )
    start(conversation, user)
    questions.reject_question(user=user, conversation_id=conversation.pk, tool_call_id="q1")
    assert {r.tool_call_id: r.is_error for r in results(conversation)} == {"q1": True, "c2": True}
    assert_history_valid(conversation)


def test_a_malformed_question_is_not_asked_the_user_sees_why_and_the_agent_goes_on(
    conversation, user, model, start
):
    model.asks(arguments={"question": "Which?", "options": [{"label": "x" * 40}]})
    start(conversation, user)
    assert conversation.agent_state == AgentState.IDLE
    [result] = results(conversation)
    assert result.is_error
    assert "at most 30 characters" in result.content
    [error] = [
        b
        for m in conversation.messages.all()
        for b in parse_blocks(m.blocks)
        if isinstance(b, ErrorBlock)
    ]
    assert error.message == INVALID_QUESTION
    assert "at most 30 characters" in error.detail
    assert model.histories[-1][-1].blocks == [result]  # the model was told


def test_questions_per_turn_are_bounded(conversation, user, model, settings, start, answer):
    settings.QUESTION_MAX_PER_TURN = 1
    model.responses.append([ToolCallRequest("q1", "question", PIZZA)])
    model.responses.append([ToolCallRequest("q2", "question", PIZZA)])
    start(conversation, user)
    answer(conversation, user, Answer(labels=["Funghi"]))
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert results(conversation)[-1].tool_call_id == "q2"
    assert results(conversation)[-1].is_error


def test_sub_agents_are_not_offered_question_tools_and_are_refused(conversation, user, model):
    # A sub-agent's turn, as spawn_agents starts one: a child conversation whose first user
    # message is its task.
    child = Conversation.objects.create(
        owner=user,
        title="Helper",
        parent=conversation,
        parent_tool_call_id="s1",
        agent_state=AgentState.LLM_REQUESTING,
    )
    add_message(child.pk, "go", role=Role.USER)
    model.asks()
    async_to_sync(runtime.run_turn)(child.pk)
    assert {t.name for t in model.tools[0]} == {"current_time", "calculate"}
    [result] = results(child)
    assert result.is_error
    assert result.content == QuestionTool.subagent_refusal
    assert model.histories[-1][-1].blocks == [result]  # the sub-agent was told, and went on
    assert not Question.objects.exists()


def test_question_tools_follow_the_setting(conversation, user, model, settings, start):
    settings.QUESTION_TOOLS = ["confirm_action"]
    model.asks()
    start(conversation, user)
    assert {t.name for t in model.tools[0]} == {
        "current_time",
        "calculate",
        "confirm_action",
        "spawn_agents",
    }
    assert results(conversation)[0].content.startswith("Unknown tool 'question'")

    settings.QUESTION_TOOLS = []
    start(conversation, user, "again")
    assert {t.name for t in model.tools[-1]} == {"current_time", "calculate", "spawn_agents"}


def test_an_earlier_question_stays_readable_by_its_call_and_the_later_one_is_pending(
    conversation, user, model, start, answer
):
    model.asks(call_id="early")
    start(conversation, user)
    answer(conversation, user, Answer(labels=["Pepperoni"]), call="early")
    for number in range(10):
        add_message(conversation.pk, f"filler {number}")
    model.asks(call_id="late")
    start(conversation, user, "Again")

    assert pending_question(conversation).tool_call_id == "late"
    early = question_for_user(user=user, conversation_id=conversation.pk, tool_call_id="early")
    assert (early.tool_call_id, early.payload.answer_text) == ("early", "Pepperoni")
    with pytest.raises(QuestionAlreadyResolved):
        question_for_user(user=user, conversation_id=conversation.pk, tool_call_id="never asked")


def test_an_unanswered_one_of_several_questions_is_named(conversation, user, model, start):
    model.asks(
        "ask_user_question",
        {
            "questions": [
                {"question": "Database?", "options": [{"label": "PG"}, {"label": "SQLite"}]},
                {
                    "question": "Features?",
                    "header": "Features",
                    "options": [{"label": "Search"}, {"label": "Export"}],
                },
            ]
        },
    )
    start(conversation, user)
    missing = answers.MISSING_ANSWER % {"text": "Features"}  # its header, else its text
    with pytest.raises(InvalidAnswer, match=re.escape(str(missing))):
        questions.answer_question(
            user=user,
            conversation_id=conversation.pk,
            tool_call_id="q1",
            answers=[Answer(labels=["PG"]), Answer(custom="  ")],
        )
    assert question_block(conversation)[1].status == "pending"
