"""Deadlines and webhooks on real processes: a question expires on time even across a server
restart and the model's next request carries the expiry; an answer racing the expiry on
PostgreSQL has one winner; a webhook receiver that fails at first still gets every event,
signed, once per webhook-id after deduplication."""

import json
import os
import random
import time
from datetime import datetime

import httpx
import pytest

from questions.answers import EXPIRED_RESULT
from tests.fake_llm import FakeLLM
from tests.fakes import WebhookReceiver
from tests.live_server import READY, LiveServer, postgres_database, race, wait_for

pytestmark = pytest.mark.live

REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379")
PIZZA_CALL = {
    "id": "call_q",
    "name": "question",
    "arguments": '{"header": "Pizza", "question": "Which pizza?", '
    '"options": [{"label": "Funghi"}, {"label": "Pepperoni"}]}',
}

# Starts a conversation whose turn a server's sweep picks up; prints its id.
START = """
from django.contrib.auth.models import User
from chat import services
user = User.objects.get(username="demo")
conversation = services.create_conversation(owner=user)
services.post_user_message(user=user, conversation_id=conversation.pk, text="Order a pizza")
print(conversation.pk)
"""


def state(server, conversation_id: int) -> str:
    [(agent_state,)] = server.query(
        "SELECT agent_state FROM chat_conversation WHERE id = %s", conversation_id
    )
    return agent_state


def question_extra(server, conversation_id: int) -> dict:
    for (blocks,) in server.query(
        "SELECT blocks FROM chat_message WHERE conversation_id = %s AND role = 'assistant'",
        conversation_id,
    ):
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
        for block in blocks:
            if block.get("action_type") == "question_request":
                return block["extra"]
    raise AssertionError("no question block")


def test_a_question_expires_on_time_after_a_server_restart(tmp_path):
    llm = FakeLLM()
    llm.queue({"tool_calls": [PIZZA_CALL]}, {"text": "I assumed Margherita."})
    server = LiveServer(
        tmp_path,
        AGENT_PROVIDER="openai",
        OPENAI_BASE_URL=f"{llm.url}/v1",
        QUESTION_EXPIRE_AFTER="4",
        PARLEY_SWEEP_SECONDS="0.3",
    )
    server.set_up_database()
    server.start()
    try:
        conversation_id = int(server.manage("shell", "-v", "0", "-c", START).strip())
        wait_for(lambda: state(server, conversation_id) == "awaiting_user", 30, "the question")
        expires_at = datetime.fromisoformat(question_extra(server, conversation_id)["expiresAt"])
        server.stop()
        # The deadline passes while no server runs: nothing resolves it meanwhile.
        time.sleep(max(0.0, expires_at.timestamp() - time.time()))
        assert state(server, conversation_id) == "awaiting_user"
        server.start()
        wait_for(lambda: state(server, conversation_id) == "idle", 30, "the expiry and reply")
        extra = question_extra(server, conversation_id)
        assert extra["questionResolution"] == "expired"
        assert extra["answeredVia"] == "expiry"
        assert "answers" not in extra and "answerText" not in extra  # no option was picked
        assert datetime.fromisoformat(extra["answeredAt"]) >= expires_at
        tool_message = llm.requests[1]["body"]["messages"][-1]
        assert tool_message["role"] == "tool"
        assert tool_message["tool_call_id"] == "call_q"
        assert EXPIRED_RESULT in str(tool_message["content"])
    finally:
        server.stop()
        llm.close()


ASK = """
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from chat import services
from chat.engine.runtime import run_turn
user = User.objects.get(username="demo")
conversation = services.create_conversation(owner=user)
services.post_user_message(user=user, conversation_id=conversation.pk, text="pizza")
async_to_sync(run_turn)(conversation.pk)
print(conversation.pk)
"""

RACE = """
from django.contrib.auth.models import User
from questions import resolving
from questions.payloads import Answer
from questions.errors import QuestionAlreadyResolved
from questions.models import Question
conversation_id, kind = {conversation_id}, {kind!r}
user = User.objects.get(username="demo")
question = Question.objects.get(conversation_id=conversation_id, tool_call_id="scripted-1-0")
{ready}
if kind == "answer":
    try:
        resolving.answer_question(
            user=user, conversation_id=conversation_id, tool_call_id="scripted-1-0",
            answers=[Answer(labels=["Funghi"])],
        )
        print("won")
    except QuestionAlreadyResolved:
        print("lost")
else:
    won = resolving.expire_question(question_id=question.pk)
    print("won" if won else "lost")
"""


def test_an_answer_and_the_expiry_at_once_on_postgresql_have_one_winner(tmp_path):
    admin_url = os.environ.get("TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
    with postgres_database(admin_url) as url:
        server = LiveServer(
            tmp_path, database_url=url, SCRIPTED_AGENT_DELAY="0", QUESTION_EXPIRE_AFTER="1"
        )
        server.set_up_database()
        for _ in range(3):
            conversation_id = int(server.manage("shell", "-v", "0", "-c", ASK).strip())
            # The expiry can win only past the deadline, a second after the question: as a
            # rule it has passed by the time the shell that asked has exited.
            expires_at = datetime.fromisoformat(
                question_extra(server, conversation_id)["expiresAt"]
            )
            time.sleep(max(0.0, expires_at.timestamp() - time.time()))
            outputs = race(
                server.env,
                {
                    kind: RACE.format(conversation_id=conversation_id, kind=kind, ready=READY)
                    for kind in ("answer", "expiry")
                },
            )
            assert [code for code, _, _ in outputs.values()] == [0, 0], outputs
            assert sorted(out.strip() for _, out, _ in outputs.values()) == ["lost", "won"]
            extra = question_extra(server, conversation_id)
            winner = "answer" if outputs["answer"][1].strip() == "won" else "expiry"
            assert extra["questionResolution"] == ("replied" if winner == "answer" else "expired")
            results = [
                b
                for (blocks,) in server.query(
                    "SELECT blocks FROM chat_message WHERE conversation_id = %s", conversation_id
                )
                for b in blocks
                if b["type"] == "tool_result"
            ]
            assert len(results) == 1


CREATE_WEBHOOK = """
from django.contrib.auth.models import User
from webhooks.services import create_webhook
_, secret = create_webhook(user=User.objects.get(username="demo"), url={url!r})
print(secret)
"""


def test_a_receiver_that_fails_at_first_still_gets_every_event_once(tmp_path):
    receiver = WebhookReceiver(500, 500, 502)
    server = LiveServer(
        tmp_path,
        REDIS_URL=f"{REDIS}/{random.randint(1, 15)}",
        SCRIPTED_AGENT_DELAY="0",
        WEBHOOK_ALLOW_PRIVATE_NETWORKS="true",
        WEBHOOK_RETRY_SECONDS="0.5",
        PARLEY_SWEEP_SECONDS="0.3",
    )
    server.set_up_database()
    secret = server.manage(
        "shell", "-v", "0", "-c", CREATE_WEBHOOK.format(url=receiver.url)
    ).strip()
    token = server.manage("create_api_token", "demo").strip()
    server.start()
    worker = server.start_worker()
    try:
        conversation_id = int(server.manage("shell", "-v", "0", "-c", START).strip())
        wait_for(lambda: state(server, conversation_id) == "awaiting_user", 30, "the question")
        respond = httpx.post(
            f"{server.url}/api/v1/conversations/{conversation_id}/respond",
            headers={"Authorization": f"Bearer {token}"},
            json={"answers": {"Which pizza should I order for the team?": "Funghi"}},
            timeout=30,
        )
        assert respond.status_code == 200, respond.text
        events = wait_for(
            lambda: (e := receiver.events(secret)) and len(e) == 2 and e, 60, "both events"
        )
        assert sorted(body["type"] for body in events.values()) == [
            "question.answered",
            "question.asked",
        ]
        for body in events.values():
            assert body["data"]["conversationId"] == conversation_id
            assert body["data"]["url"].endswith(f"/c/{conversation_id}/#question-scripted-1-0")
        # The failures were retried under the same webhook-id: more requests than events.
        assert len(receiver.requests) == 2 + 3
        # A delivery is marked delivered just after its receiver answered: wait for that write.
        rows = wait_for(
            lambda: (
                (r := server.query("SELECT status, attempts FROM webhooks_delivery ORDER BY id"))
                and [status for status, _ in r] == ["delivered", "delivered"]
                and r
            ),
            10,
            "both deliveries marked delivered",
        )
        assert sum(attempts for _, attempts in rows) == 5
    finally:
        worker.terminate()
        worker.wait(10)
        server.stop()
        receiver.close()
