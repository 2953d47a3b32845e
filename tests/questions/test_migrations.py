"""Questions stored before they had rows (questions.migrations 0004-0006): each
question_request block becomes a Question row with its deadline, resolution and audit, and
drafts move to their question; backwards, the deadlines and the drafts' keys come back."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from chat.blocks import ActionBlock
from questions.models import Question, QuestionDraft, QuestionStatus
from questions.payloads import payload_of

# Also run on PostgreSQL (make test): the migration runs on both backends.
pytestmark = pytest.mark.postgres

BEFORE_ROWS = ("questions", "0003_question_drafts")
NOW = timezone.now()


def executor() -> MigrationExecutor:
    """A fresh executor: its loader reads what is applied now."""
    return MigrationExecutor(connection)


def migrate(*targets) -> None:
    executor().migrate(list(targets))


def latest():
    return [node for node in executor().loader.graph.leaf_nodes()]


def historical_apps(questions_node):
    """The models as they are with every app at its latest migration but questions at
    `questions_node` (and the apps built on questions' rows, such as mcp_server, left out)."""
    graph = executor().loader.graph
    nodes = [
        node
        for node in latest()
        if not any(app == "questions" for app, _ in graph.forwards_plan(node))
    ] + [questions_node]
    return executor().loader.project_state(nodes).apps


def when(seconds: float) -> str:
    return (NOW + timedelta(seconds=seconds)).isoformat()


PIZZA = [
    {
        "header": "Pizza",
        "question": "Which pizza?",
        "details": "",
        "options": [
            {"label": "Margherita", "description": "Tomato"},
            {"label": "Funghi", "description": ""},
        ],
        "multiSelect": False,
        "custom": True,
    }
]
TWO = [
    {"header": "Base", "question": "Base?", "options": [{"label": "Thin", "description": ""}]},
    {
        "header": "",
        "question": "Extras?",
        "options": [{"label": "Olives", "description": ""}, {"label": "Basil", "description": ""}],
        "multiSelect": True,
    },
]
CONFIRM = [
    {
        "header": "Confirm",
        "question": "Delete 3 files?",
        "options": [{"label": "Yes", "description": ""}, {"label": "No", "description": ""}],
        "custom": False,
        "dangerous": True,
    }
]
FLAT_OPTIONS = [{"label": "S"}, {"label": "L"}]


def block(call_id: str, resolution: str, *, tool="question", questions=PIZZA, **fields) -> dict:
    """A question_request block as the previous release stored it (questions.blocks then)."""
    first = questions[0]
    extra = {
        "toolCallId": call_id,
        "toolName": tool,
        "questionHeader": first.get("header", ""),
        "questionText": first["question"],
        "questionOptions": first.get("options", []),
        "questionMultiple": first.get("multiSelect", False),
        "questionCustom": first.get("custom", True),
        "questions": questions,
        "questionResolution": resolution,
        "needsUserAction": resolution == "asked",
        **fields,
    }
    status = {"asked": "pending", "replied": "success"}.get(resolution, "denied")
    return {"type": "action", "action_type": "question_request", "status": status, "extra": extra}


def call(call_id: str, tool="question") -> dict:
    return {"type": "tool_call", "id": call_id, "name": tool, "arguments": {}}


def text(value: str, **fields) -> dict:
    return {"type": "text", "text": value, **fields}


class OldWorld:
    """Rows written with the models of the release before questions had rows."""

    def __init__(self, apps) -> None:
        self.apps = apps
        User = apps.get_model("auth", "User")
        self.ada = User.objects.create(username="ada")
        self.Conversation = apps.get_model("chat", "Conversation")
        self.Message = apps.get_model("chat", "Message")
        self.Deadline = apps.get_model("questions", "Deadline")
        self.Draft = apps.get_model("questions", "QuestionDraft")

    def conversation(self, title: str, state: str = "idle"):
        return self.Conversation.objects.create(owner=self.ada, title=title, agent_state=state)

    def messages(self, conversation, *rows) -> list:
        """One message per (role, blocks), in order."""
        return [
            self.Message.objects.create(
                conversation=conversation,
                role=role,
                order=order,
                blocks=blocks,
                created_seq=order + 1,
                seq=order + 1,
            )
            for order, (role, blocks) in enumerate(rows)
        ]

    def answered(self, title: str, asked: dict, reply_text: str, **resolution):
        """A question answered by the user message after it (`answerMessageId` names it)."""
        conversation = self.conversation(title)
        _prompt, asking, reply, _result = self.messages(
            conversation,
            ("user", [text("Lunch?")]),
            ("assistant", [call("q1", asked["extra"]["toolName"]), asked]),
            ("user", [text(reply_text, **resolution.pop("reply_fields", {}))]),
            ("tool", [{"type": "tool_result", "tool_call_id": "q1", "content": reply_text}]),
        )
        asking.blocks = [
            call("q1", asked["extra"]["toolName"]),
            {**asked, "extra": {**asked["extra"], "answerMessageId": str(reply.pk)}},
        ]
        asking.save()
        return conversation, asking, reply


@pytest.fixture
def old_world():
    migrate(BEFORE_ROWS)
    yield OldWorld(historical_apps(BEFORE_ROWS))
    migrate(*latest())  # leaves the schema as the other tests expect, whatever happened


def blocks(Message) -> dict[int, list]:
    return dict(Message.objects.values_list("pk", "blocks"))


def by_title(title: str) -> Question:
    return Question.objects.select_related("answered_by", "reply", "message").get(
        conversation__title=title
    )


# Migrations change the schema: they cannot run inside a test's transaction (SQLite refuses
# to alter tables in one), so this test commits and Django flushes the tables after it.
@pytest.mark.django_db(transaction=True)
def test_questions_stored_before_rows_become_rows_and_back(old_world):
    old = old_world
    # Waiting for its answer, with a deadline and a draft (keyed by conversation and call).
    waiting = old.conversation("waiting", state="awaiting_user")
    _, waiting_message = old.messages(
        waiting,
        ("user", [text("Lunch?")]),
        ("assistant", [call("q1"), block("q1", "asked", expiresAt=when(60))]),
    )
    old.Deadline.objects.create(
        conversation=waiting,
        tool_call_id="q1",
        expires_at=NOW + timedelta(seconds=60),
        remind_at=NOW + timedelta(seconds=48),
    )
    old.Draft.objects.create(
        conversation=waiting,
        tool_call_id="q1",
        user=old.ada,
        data=[{"labels": ["Funghi"], "custom": ""}],
        client="tab-1",
    )
    # A draft of a question that is not in any transcript.
    old.Draft.objects.create(conversation=waiting, tool_call_id="gone", user=old.ada, data=[])
    # Answered in the browser, with the audit.
    _, _, answer = old.answered(
        "answered",
        block(
            "q1",
            "replied",
            answerText="Funghi",
            answers=[{"labels": ["Funghi"], "custom": ""}],
            answeredBy="ada",
            answeredAt=when(-100),
            answeredVia="browser",
        ),
        "Funghi",
        reply_fields={"shown_elsewhere": True},
    )
    # Answered by an ordinary message: no per-question answers.
    _, _, message = old.answered(
        "auto-resolved",
        block(
            "q1",
            "replied",
            tool="ask_user_question",
            questions=TWO,
            answerText="Surprise me",
            answeredBy="ada",
            answeredAt=when(-90),
            answeredVia="auto-resolve",
        ),
        "Surprise me",
    )
    # Rejected over the API.
    rejected = old.conversation("rejected")
    old.messages(
        rejected,
        ("user", [text("Clean up")]),
        (
            "assistant",
            [
                call("q1", "confirm_action"),
                block(
                    "q1",
                    "rejected",
                    tool="confirm_action",
                    questions=CONFIRM,
                    answeredBy="ada",
                    answeredAt=when(-80),
                    answeredVia="api",
                ),
            ],
        ),
    )
    # Expired, reminded before, with its expired deadline.
    expired = old.conversation("expired")
    old.messages(
        expired,
        ("user", [text("Lunch?")]),
        (
            "assistant",
            [
                call("q1"),
                block(
                    "q1",
                    "expired",
                    expiresAt=when(-5),
                    answeredAt=when(-5),
                    answeredVia="expiry",
                ),
            ],
        ),
    )
    old.Deadline.objects.create(
        conversation=expired,
        tool_call_id="q1",
        expires_at=NOW - timedelta(seconds=5),
        remind_at=NOW - timedelta(seconds=20),
        reminded_at=NOW - timedelta(seconds=19),
        resolved_at=NOW - timedelta(seconds=5),
        expired=True,
    )
    # The contract's original flat shape: one question in the flat fields only, no `questions` list.
    flat = old.conversation("flat")
    old.messages(
        flat,
        ("user", [text("Size?")]),
        (
            "assistant",
            [
                call("q9"),
                {
                    "type": "action",
                    "action_type": "question_request",
                    "status": "denied",
                    "extra": {
                        "toolCallId": "q9",
                        "toolName": "question",
                        "questionText": "Which size?",
                        "questionOptions": FLAT_OPTIONS,
                        "questionResolution": "rejected",
                    },
                },
            ],
        ),
    )
    # Left pending in a conversation that moved on: it can never be answered.
    orphan = old.conversation("orphan")
    old.messages(
        orphan,
        ("user", [text("Lunch?")]),
        ("assistant", [call("q1"), block("q1", "asked")]),
        ("system", [{"type": "notice", "message": "Stopped."}]),
    )

    written = blocks(old.Message)
    migrate(*latest())

    assert Question.objects.count() == 7
    pending = by_title("waiting")
    assert (pending.status, pending.kind, pending.tool_call_id) == ("pending", "question", "q1")
    assert pending.message_id == waiting_message.pk
    assert pending.questions == PIZZA
    assert pending.expires_at == NOW + timedelta(seconds=60)
    assert pending.remind_at == NOW + timedelta(seconds=48)
    assert pending.reminded_at is None
    assert (pending.answered_by, pending.answered_at, pending.answered_via) == (None, None, "")
    assert (pending.answers, pending.answer_text, pending.reply) == (None, "", None)
    [draft] = QuestionDraft.objects.all()  # the one of a question that does not exist is gone
    assert draft.question == pending
    assert (draft.user.username, draft.data, draft.client) == (
        "ada",
        [{"labels": ["Funghi"], "custom": ""}],
        "tab-1",
    )

    answered = by_title("answered")
    assert (answered.status, answered.answered_via) == ("answered", "browser")
    assert answered.answered_by.username == "ada"
    assert answered.answered_at == NOW - timedelta(seconds=100)
    assert answered.answers == [{"labels": ["Funghi"], "custom": ""}]
    assert (answered.answer_text, answered.reply_id) == ("Funghi", answer.pk)

    auto = by_title("auto-resolved")
    assert (auto.status, auto.kind, auto.answered_via) == (
        "auto_resolved",
        "ask_user_question",
        "auto-resolve",
    )
    assert (auto.answers, auto.answer_text, auto.reply_id) == (None, "Surprise me", message.pk)
    assert auto.answered_by.username == "ada"
    assert [q.text for q in auto.request.questions] == ["Base?", "Extras?"]

    refused = by_title("rejected")
    assert (refused.status, refused.kind, refused.answered_via) == (
        "rejected",
        "confirm_action",
        "api",
    )
    assert (refused.answered_by.username, refused.answered_at) == (
        "ada",
        NOW - timedelta(seconds=80),
    )
    assert refused.request.questions[0].dangerous

    lapsed = by_title("expired")
    assert (lapsed.status, lapsed.answered_by, lapsed.answered_via) == ("expired", None, "expiry")
    assert lapsed.expires_at == NOW - timedelta(seconds=5)
    assert lapsed.remind_at == NOW - timedelta(seconds=20)
    assert lapsed.reminded_at == NOW - timedelta(seconds=19)

    seed = by_title("flat")
    assert (seed.status, seed.kind, seed.tool_call_id) == ("rejected", "question", "q9")
    [only] = seed.request.questions
    assert (only.text, only.labels) == ("Which size?", ["S", "L"])

    assert by_title("orphan").status == QuestionStatus.CANCELLED

    # Every row says what the block the pages show says; the one that can no longer be
    # answered shows no controls.
    for question in Question.objects.select_related("answered_by", "message"):
        [shown] = [b for b in question.message.blocks if b["type"] == "action"]
        assert payload_of(ActionBlock.model_validate(shown)) == question.payload, question
    assert not by_title("orphan").payload.needs_user_action

    migrate(BEFORE_ROWS)

    apps = historical_apps(BEFORE_ROWS)
    assert blocks(apps.get_model("chat", "Message")) == written  # as earlier versions wrote them
    Deadline = apps.get_model("questions", "Deadline")
    deadlines = {
        d.conversation.title: (d.expires_at, d.remind_at, d.reminded_at, d.expired)
        for d in Deadline.objects.select_related("conversation")
    }
    assert deadlines == {
        "waiting": (NOW + timedelta(seconds=60), NOW + timedelta(seconds=48), None, False),
        "expired": (
            NOW - timedelta(seconds=5),
            NOW - timedelta(seconds=20),
            NOW - timedelta(seconds=19),
            True,
        ),
    }
    assert Deadline.objects.get(conversation__title="waiting").resolved_at is None
    assert Deadline.objects.get(conversation__title="expired").resolved_at is not None
    Draft = apps.get_model("questions", "QuestionDraft")
    assert list(Draft.objects.values_list("conversation__title", "tool_call_id", "client")) == [
        ("waiting", "q1", "tab-1")
    ]

    migrate(*latest())

    assert Question.objects.count() == 7
    assert by_title("waiting").status == "pending"
    assert by_title("waiting").expires_at == NOW + timedelta(seconds=60)
    assert QuestionDraft.objects.get().question == by_title("waiting")
    assert sorted(Question.objects.values_list("conversation__title", "status")) == [
        ("answered", "answered"),
        ("auto-resolved", "auto_resolved"),
        ("expired", "expired"),
        ("flat", "rejected"),
        ("orphan", "cancelled"),
        ("rejected", "rejected"),
        ("waiting", "pending"),
    ]
