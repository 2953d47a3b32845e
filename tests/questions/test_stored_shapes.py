"""Question blocks and tool results stored by earlier versions still load, render and feed the
model correctly."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from chat.blocks import ActionBlock, TextBlock, ToolCallBlock, dump_blocks
from chat.engine.runtime import build_history
from chat.models import AgentState, Message, Role
from questions.payloads import Answer, QuestionPayload, payload_of, question_block
from questions.schemas import AskedQuestion, Option

FUNGHI = {"label": "Funghi", "description": ""}
# A replied block exactly as the first release stored it.
PREVIOUS_SHAPE = {
    "type": "action",
    "action_type": "question_request",
    "status": "success",
    "extra": {
        "toolCallId": "q1",
        "toolName": "question",
        "questionHeader": "Pizza",
        "questionText": "Which pizza?",
        "questionDetails": "",
        "questionOptions": [{"label": "Margherita", "description": "Tomato"}, FUNGHI],
        "questionMultiple": False,
        "questionCustom": True,
        "questionDefault": None,
        "questions": [
            {
                "header": "Pizza",
                "question": "Which pizza?",
                "details": "",
                "options": [{"label": "Margherita", "description": "Tomato"}, FUNGHI],
                "multiSelect": False,
                "custom": True,
                "default": None,
            }
        ],
        "questionResolution": "replied",
        "needsUserAction": False,
        "answerText": "Funghi",
        "answers": [{"labels": ["Funghi"], "custom": ""}],
        "answerMessageId": "7",
    },
}


def test_a_block_of_the_previous_shape_loads_as_the_typed_payload():
    question = payload_of(ActionBlock.model_validate(PREVIOUS_SHAPE))
    assert question.tool_call_id == "q1"
    assert question.questions == [
        AskedQuestion(
            header="Pizza",
            text="Which pizza?",
            options=[Option(label="Margherita", description="Tomato"), Option(label="Funghi")],
        )
    ]
    assert (question.question_resolution, question.status) == ("replied", "success")
    assert (question.answer_text, question.answer_message_id) == ("Funghi", "7")
    assert question.answers == [Answer(labels=["Funghi"])]
    # Written again, it is the same JSON but for the nulls it no longer stores.
    again = question_block(question).model_dump(mode="json")
    expected = {k: v for k, v in PREVIOUS_SHAPE["extra"].items() if v is not None}
    expected["questions"] = [
        {k: v for k, v in q.items() if v is not None} for q in expected["questions"]
    ]
    assert again == {**PREVIOUS_SHAPE, "extra": expected}


def test_a_block_in_seed_000s_flat_shape_loads():
    flat = {
        "toolCallId": "q9",
        "toolName": "question",
        "questionHeader": "Size",
        "questionText": "Which size?",
        "questionOptions": [{"label": "S"}, {"label": "L"}],
        "questionMultiple": True,
        "questionCustom": False,
        "questionResolution": "asked",
        "needsUserAction": True,
    }
    question = QuestionPayload.model_validate(flat)
    [only] = question.questions
    assert (only.text, only.labels, only.multiple, only.custom) == (
        "Which size?",
        ["S", "L"],
        True,
        False,
    )
    assert question.needs_user_action is True


def test_derived_fields_cannot_disagree_with_what_they_mirror():
    stored = {**PREVIOUS_SHAPE["extra"], "questionText": "Something else", "needsUserAction": True}
    question = QuestionPayload.model_validate(stored)
    dumped = question.model_dump(mode="json")
    assert (dumped["questionText"], dumped["needsUserAction"]) == ("Which pizza?", False)


def test_unknown_fields_are_refused():
    with pytest.raises(ValueError, match="extra"):
        QuestionPayload.model_validate({**PREVIOUS_SHAPE["extra"], "injected": "<script>"})
    with pytest.raises(ValueError, match="valid dictionary"):
        QuestionPayload.model_validate(["not", "an", "object"])


@pytest.mark.parametrize(
    "extra",
    [
        {**PREVIOUS_SHAPE["extra"], "questionResolution": "forgotten"},
        {**PREVIOUS_SHAPE["extra"], "toolName": "calculate"},
        {"toolCallId": "q1"},
    ],
)
def test_a_stored_question_block_that_cannot_be_read_is_no_question(extra):
    assert payload_of(ActionBlock.model_validate({**PREVIOUS_SHAPE, "extra": extra})) is None
    assert payload_of(TextBlock(text="Which pizza?")) is None


@pytest.mark.django_db
def test_a_stored_block_of_the_previous_shape_renders_on_the_page(client, user, conversation):
    Message.objects.create(
        conversation=conversation,
        role=Role.ASSISTANT,
        order=0,
        blocks=[{"type": "text", "text": "Let me ask."}, PREVIOUS_SHAPE],
        created_seq=1,
        seq=1,
    )
    client.force_login(user)
    html = client.get(reverse("chat:conversation_detail", args=[conversation.pk])).content.decode()
    assert 'role="group" aria-label="Pizza"' in html
    assert "Which pizza?" in html
    assert "Funghi" in html
    assert "<form" not in html.split('id="question-q1"')[1].split("</div>")[0]


# Migrations run outside the test's transaction (SQLite cannot alter tables inside one).
@pytest.mark.django_db(transaction=True)
def test_the_migration_names_the_reply_on_results_stored_before():
    executor = MigrationExecutor(connection)
    executor.migrate([("chat", "0003_turn_questions"), ("questions", None)])
    apps = executor.loader.project_state([("chat", "0003_turn_questions")]).apps
    User = apps.get_model("auth", "User")
    Conversation = apps.get_model("chat", "Conversation")
    OldMessage = apps.get_model("chat", "Message")
    owner = User.objects.create(username="old")
    conversation = Conversation.objects.create(owner=owner, agent_state=AgentState.IDLE)
    call = ToolCallBlock(id="q1", name="question", arguments={"question": "Which pizza?"})
    rows = [
        (Role.USER, [TextBlock(text="Order lunch").model_dump()]),
        (Role.ASSISTANT, [call.model_dump(), PREVIOUS_SHAPE]),
        (Role.USER, [TextBlock(text="Funghi").model_dump()]),
        (Role.TOOL, [{"type": "tool_result", "tool_call_id": "q1", "content": "Funghi"}]),
        (Role.ASSISTANT, dump_blocks([TextBlock(text="Funghi it is.")])),
    ]
    ids = [
        OldMessage.objects.create(
            conversation=conversation, role=role, order=n, blocks=blocks, created_seq=n, seq=n
        ).pk
        for n, (role, blocks) in enumerate(rows)
    ]
    answer_id = ids[2]
    OldMessage.objects.filter(pk=ids[1]).update(
        blocks=[
            call.model_dump(),
            {
                **PREVIOUS_SHAPE,
                "extra": {**PREVIOUS_SHAPE["extra"], "answerMessageId": str(answer_id)},
            },
        ]
    )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    result = Message.objects.get(pk=ids[3]).blocks[0]
    assert result["reply_message_id"] == answer_id
    # The model reads the answer once: as the tool result, not again as a user message.
    history = build_history(conversation.pk)
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
