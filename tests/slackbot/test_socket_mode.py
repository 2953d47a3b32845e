"""Socket Mode (`manage.py slack_socket`): the worker opens the socket that apps.connections
.open names (with the app-level token), handles each interaction as the Interactivity URL
does and acknowledges it with its answer, and opens a new socket when Slack says to."""

import asyncio
import json
import queue
import threading

import pytest
from aiohttp import web

from questions.models import QuestionStatus
from slackbot import socket
from tests.slackbot.conftest import click, submission

pytestmark = pytest.mark.postgres


class FakeSocketEndpoint:
    """Slack's side of the socket, on a loop of its own: connection n sends the envelopes
    `sends[n]`, then (but the last) asks the client to reconnect once each is acknowledged."""

    def __init__(self, sends: list[list[dict]]) -> None:
        self.sends = sends
        self.acks: queue.Queue = queue.Queue()
        self.connections = 0
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        threading.Thread(target=self._run, args=(started,), daemon=True).start()
        assert started.wait(10)

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_get("/link", self.connection)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        started.set()
        self.loop.run_forever()

    def url(self, n: int) -> str:
        return f"ws://127.0.0.1:{self.port}/link?n={n}"

    async def connection(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        n = int(request.query["n"])
        self.connections += 1
        await ws.send_json({"type": "hello", "num_connections": 1})
        waiting = {envelope["envelope_id"] for envelope in self.sends[n]}
        for envelope in self.sends[n]:
            await ws.send_json(envelope)
        async for message in ws:
            ack = json.loads(message.data)
            self.acks.put((n, ack))
            waiting.discard(ack.get("envelope_id"))
            if not waiting and n + 1 < len(self.sends):
                await ws.send_json({"type": "disconnect", "reason": "refresh_requested"})
        return ws

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def envelope(envelope_id: str, payload: dict) -> dict:
    return {
        "envelope_id": envelope_id,
        "type": "interactive",
        "accepts_response_payload": True,
        "payload": payload,
    }


class Worker:
    """`manage.py slack_socket`'s serve(), on a thread of its own until stopped."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(
            target=self.loop.run_until_complete, args=(socket.serve(self.stop),), daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(20)


@pytest.mark.django_db(transaction=True)
def test_socket_mode_answers_acknowledges_and_reconnects(linked, conversation, ask, slack):
    question = ask(linked, conversation)
    first = envelope("e1", click(question, "option:1", f"{question.pk}:1"))
    values = {"q0": {"chosen": {"type": "radio_buttons", "selected_option": {"value": "0"}}}}
    second = envelope("e2", submission(question, "parley_answer", values))
    endpoint = FakeSocketEndpoint([[first], [second]])
    slack.socket_urls = [endpoint.url(0), endpoint.url(1)]
    worker = Worker()
    try:
        acks = [endpoint.acks.get(timeout=20), endpoint.acks.get(timeout=20)]
    finally:
        worker.close()
        endpoint.close()

    assert [(n, ack["envelope_id"]) for n, ack in acks] == [(0, "e1"), (1, "e2")]
    assert "payload" not in acks[0][1] or not acks[0][1]["payload"]
    # The second, on the new socket: the question was answered by the first already.
    assert acks[1][1]["payload"]["response_action"] == "update"
    question.refresh_from_db()
    assert (question.status, question.answered_via, question.answer_text) == (
        QuestionStatus.ANSWERED,
        "slack",
        "Pepperoni",
    )
    assert endpoint.connections == 2
    assert slack.tokens("apps.connections.open") == ["Bearer xapp-test-token"] * 2
