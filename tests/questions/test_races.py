"""Two answers at the same moment: exactly one wins, the other is told it was already answered,
and the transcript holds one answer and one tool result."""

import os
import threading

import pytest
from django.db import connection

from chat import services
from chat.blocks import ToolResultBlock, parse_blocks
from chat.errors import AgentBusy
from chat.models import Role
from questions import resolving as questions
from questions.errors import QuestionAlreadyResolved
from questions.payloads import Answer, payload_of
from tests.live_server import READY, LiveServer, postgres_database, race

# Also run on PostgreSQL (make test): first wins across threads and processes (row locks and
# conditional updates).
pytestmark = pytest.mark.postgres


# Two threads race, each in its own transaction on its own connection: they must see the
# committed question, and each other's commits.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("second", ["answer", "reject", "message"])
def test_two_threads_resolving_at_once_one_wins(conversation, user, model, second):
    model.asks()
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def resolve(slot, kind):
        try:
            barrier.wait()
            if kind == "answer":
                questions.answer_question(
                    user=user,
                    conversation_id=conversation.pk,
                    tool_call_id="q1",
                    answers=[Answer(labels=["Funghi"])],
                )
            elif kind == "reject":
                questions.reject_question(
                    user=user, conversation_id=conversation.pk, tool_call_id="q1"
                )
            else:
                services.post_user_message(
                    user=user, conversation_id=conversation.pk, text="Funghi, please"
                )
            outcomes[slot] = "won"
        except QuestionAlreadyResolved:
            outcomes[slot] = "already answered"
        except AgentBusy:
            outcomes[slot] = "busy"
        except Exception as error:  # pragma: no cover - shown if it ever happens
            outcomes[slot] = repr(error)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=resolve, args=slot)
        for slot in (("answer", "answer"), ("other", second))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    [question] = [
        q
        for m in conversation.messages.filter(role=Role.ASSISTANT)
        for b in parse_blocks(m.blocks)
        if (q := payload_of(b)) is not None
    ]
    if second == "message" and outcomes["answer"] == "won":
        # The message lost: refused while the resumed agent ran, or, once it was done, a new
        # turn of its own; either way it is not the question's answer.
        assert outcomes["other"] in ("busy", "won")
        assert question.answer_text == "Funghi"
    elif second == "message":
        assert outcomes == {"other": "won", "answer": "already answered"}
        assert question.answer_text == "Funghi, please"
    else:
        assert sorted(outcomes.values()) == ["already answered", "won"]
        rejected = second == "reject" and outcomes["other"] == "won"
        assert question.question_resolution == ("rejected" if rejected else "replied")
    tool_results = [
        b
        for m in conversation.messages.all()
        for b in parse_blocks(m.blocks)
        if isinstance(b, ToolResultBlock) and b.tool_call_id == "q1"
    ]
    assert len(tool_results) == 1


RESOLVE = """
from django.contrib.auth.models import User
from questions import resolving
from questions.payloads import Answer, payload_of
from questions.errors import QuestionAlreadyResolved
conversation_id, label = {conversation_id}, {label!r}
user = User.objects.get(username="demo")
{ready}
try:
    resolving.answer_question(
        user=user, conversation_id=conversation_id, tool_call_id="scripted-1-0",
        answers=[Answer(labels=[label])],
    )
    print("won")
except QuestionAlreadyResolved:
    print("already answered")
"""

ASK = """
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from chat import services
from chat.engine.runtime import run_turn
user = User.objects.get(username="demo")
conversation = services.create_conversation(owner=user)
services.post_user_message(user=user, conversation_id=conversation.pk, text="pizza")
async_to_sync(run_turn)(conversation.pk)
conversation.refresh_from_db()
print(conversation.pk, conversation.agent_state)
"""


@pytest.mark.live
def test_two_processes_answering_at_once_on_postgresql_one_wins(tmp_path):
    admin_url = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
    with postgres_database(admin_url) as url:
        server = LiveServer(tmp_path, database_url=url, SCRIPTED_AGENT_DELAY="0")
        server.set_up_database()
        conversation_id, state = server.manage("shell", "-v", "0", "-c", ASK).split()
        assert state == "awaiting_user"
        outputs = race(
            server.env,
            {
                label: RESOLVE.format(conversation_id=conversation_id, label=label, ready=READY)
                for label in ("Funghi", "Pepperoni")
            },
        )
        assert [code for code, _, _ in outputs.values()] == [0, 0], outputs
        assert sorted(out.strip() for _, out, _ in outputs.values()) == ["already answered", "won"]
        rows = server.query(
            "SELECT role, blocks FROM chat_message WHERE conversation_id = %s",
            int(conversation_id),
        )
        answers = [blocks for role, blocks in rows if role == Role.USER][1:]
        assert len(answers) == 1
        tool_results = [b for _, blocks in rows for b in blocks if b["type"] == "tool_result"]
        assert len(tool_results) == 1
