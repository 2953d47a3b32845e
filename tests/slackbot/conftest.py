"""The Slack tests' fakes: a local Slack Web API that the app is pointed at (SLACK_API_URL),
recording each call and answering as Slack does (or with a 429, a 500, or nothing at all);
interaction payloads signed as Slack signs them; a linked user; a question and an approval
asked in their conversation."""

import hashlib
import hmac
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode

import pytest
from django.urls import reverse
from django.utils import timezone

from chat import services
from chat.blocks import ToolCallBlock
from chat.engine import turns
from chat.engine.providers.base import TextDelta
from questions import asking
from questions.models import Question
from questions.payloads import ApprovalRequest, ElicitationRequest, RuleNote
from slackbot.models import SlackLink
from webhooks import delivery

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = "T0PARLEY"
ADA = "U0ADA"


@dataclass
class Call:
    method: str
    arguments: dict
    authorization: str


@dataclass
class FakeSlack:
    """The Web API at `url`; `calls` in order. `fail(method, status, headers, times)` makes
    the next `times` calls of `method` answer with that status."""

    url: str = ""
    calls: list[Call] = field(default_factory=list)
    failures: dict[str, list[tuple[int, dict]]] = field(default_factory=dict)
    socket_urls: list[str] = field(default_factory=list)
    # Channels the bot is not in (conversations.info), members it does not know (users.info).
    outside: set[str] = field(default_factory=set)
    strangers: set[str] = field(default_factory=set)
    _ts: itertools.count = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, method: str, status: int, headers: dict | None = None, *, times: int = 1):
        with self.lock:
            self.failures.setdefault(method, []).extend([(status, headers or {})] * times)

    def called(self, method: str) -> list[dict]:
        with self.lock:
            return [call.arguments for call in self.calls if call.method == method]

    def tokens(self, method: str) -> list[str]:
        """The Authorization header of each call of `method`."""
        with self.lock:
            return [call.authorization for call in self.calls if call.method == method]

    def answer(self, method: str, arguments: dict, authorization: str) -> tuple[int, dict, dict]:
        with self.lock:
            self.calls.append(Call(method, arguments, authorization))
            queued = self.failures.get(method)
            if queued:
                status, headers = queued.pop(0)
                error = "ratelimited" if status == 429 else "internal_error"
                return status, headers, {"ok": False, "error": error}
            ts = f"1700000000.{next(self._ts):06d}"
        if method == "chat.postMessage":
            posted = arguments["channel"]
            channel = posted if posted.startswith(("C", "G")) else "D" + posted
            return 200, {}, {"ok": True, "channel": channel, "ts": ts}
        if method == "chat.postEphemeral":
            return 200, {}, {"ok": True, "message_ts": ts}
        if method == "views.open":
            return 200, {}, {"ok": True, "view": {"id": "V0VIEW"}}
        if method == "users.info":
            member = arguments.get("user")
            if member in self.strangers:
                return 200, {}, {"ok": False, "error": "user_not_found"}
            return 200, {}, {"ok": True, "user": {"id": member, "team_id": TEAM}}
        if method == "conversations.info":
            member = arguments.get("channel") not in self.outside
            channel = {"id": arguments.get("channel"), "is_member": member}
            return 200, {}, {"ok": True, "channel": channel}
        if method == "apps.connections.open":
            with self.lock:
                url = self.socket_urls.pop(0) if self.socket_urls else ""
            return 200, {}, {"ok": bool(url), "url": url}
        return 200, {}, {"ok": True}


def slack_handler(fake: FakeSlack):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
            if "json" in (self.headers.get("Content-Type") or ""):
                arguments = json.loads(raw or "{}")
            else:
                arguments = {k: v[0] for k, v in parse_qs(raw).items()}
            method = self.path.rstrip("/").rsplit("/", 1)[-1]
            authorization = self.headers.get("Authorization", "")
            status, headers, body = fake.answer(method, arguments, authorization)
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def slack(settings):
    """The fake Web API, with the app configured to use it."""
    fake = FakeSlack()
    server = ThreadingHTTPServer(("127.0.0.1", 0), slack_handler(fake))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    settings.SLACK_BOT_TOKEN = "xoxb-test-token"
    settings.SLACK_SIGNING_SECRET = SECRET
    settings.SLACK_APP_TOKEN = "xapp-test-token"
    settings.SLACK_API_URL = fake.url
    yield fake
    server.shutdown()
    server.server_close()


def sign(body: str, *, timestamp: int | None = None, secret: str = SECRET) -> dict[str, str]:
    """Slack's request signature (v0: HMAC-SHA256 of "v0:<timestamp>:<body>")."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256)
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


def form(payload: dict) -> str:
    """An interaction's body as Slack posts it: form-encoded, its JSON in `payload`."""
    return urlencode({"payload": json.dumps(payload)})


@pytest.fixture
def interact(client, committed):
    """`interact(payload, headers=None)`: Slack posts the interaction, signed (or with
    `headers`) to the Interactivity URL; what it commits runs (the turn resumes)."""

    def interact(payload: dict, *, headers: dict | None = None, body: str | None = None):
        body = form(payload) if body is None else body
        with committed():
            return client.post(
                reverse("slackbot:interactions"),
                data=body,
                content_type="application/x-www-form-urlencoded",
                headers=sign(body) if headers is None else headers,
            )

    return interact


# Each click's own action_ts, as Slack stamps every click (two clicks never sign alike).
CLICKS = itertools.count(1)


def click(question: Question, action_id: str, value: str, *, user: str = ADA) -> dict:
    """A block_actions payload: `user` clicked a button of the question's message."""
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": TEAM},
        "team": {"id": TEAM},
        "api_app_id": "A0PARLEY",
        "trigger_id": "1337.42.abcdef",
        "container": {"type": "message", "channel_id": "D" + user, "message_ts": "1.2"},
        "channel": {"id": "D" + user},
        "response_url": "https://hooks.slack.invalid/actions/x",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": f"parley:{question.pk}",
                "value": value,
                "action_ts": f"1700000000.{next(CLICKS):06d}",
            }
        ],
    }


def submission(question: Question, callback_id: str, values: dict, *, user: str = ADA) -> dict:
    """A view_submission payload of a modal opened for the question."""
    return {
        "type": "view_submission",
        "user": {"id": user, "team_id": TEAM},
        "team": {"id": TEAM},
        "trigger_id": "1337.43.abcdef",
        "view": {
            "id": "V0VIEW",
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": json.dumps({"q": question.pk}),
            "state": {"values": values},
        },
    }


def link(user, slack_user_id: str = ADA) -> SlackLink:
    return SlackLink.objects.create(
        user=user,
        slack_user_id=slack_user_id,
        team_id=TEAM,
        nonce=f"nonce-{slack_user_id}",
        confirmed_at=timezone.now(),
    )


@pytest.fixture
def linked(user):
    """ada, linked to the Slack member U0ADA."""
    link(user)
    return user


@pytest.fixture
def ask(model, committed):
    """`ask(user, conversation, tool="question", arguments=None)`: the agent says a line,
    then asks (by default the Pizza question: one choice among three). Returns its row."""

    def ask(user, conversation, tool="question", arguments=None, words="I checked the menu."):
        model.asks(tool, arguments, also=[TextDelta(words)])
        with committed():
            services.post_user_message(user=user, conversation_id=conversation.pk, text="Lunch?")
        return Question.objects.get(conversation=conversation, tool_call_id="q1")

    return ask


@pytest.fixture
def ask_approval(user, conversation):
    """`ask_approval(needed=1)`: the agent's step calls write_note, which asks for approval
    (of `needed` people: an ask rule's quorum). Returns its row."""

    def ask_approval(needed: int = 1) -> Question:
        services.post_user_message(user=user, conversation_id=conversation.pk, text="Notes")
        claim = turns.claim(conversation.pk, step_limit=10)
        call = ToolCallBlock(id="c0", name="mcp__notes__write_note", arguments={"name": "n"})
        turns.complete_step(claim.lease, text="", tool_calls=[call])
        request = ApprovalRequest.of(
            name="mcp__notes__write_note",
            server="notes",
            tool="write_note",
            title="Write note <@U0BOSS>",
            description="",
            arguments=call.arguments,
            input_schema={"type": "object"},
            asked_by=RuleNote(
                id="1", scope="user", label="write_note", effect="ask", needed=needed
            ),
        )
        assert asking.ask_approvals(claim.lease, [(call, request)])
        return Question.objects.get(conversation=conversation, tool_call_id="c0")

    return ask_approval


FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Note name", "maxLength": 10},
        "priority": {"type": "integer", "title": "Priority", "minimum": 1, "maximum": 5},
        "pinned": {"type": "boolean", "title": "Pinned", "default": False},
        "colour": {"type": "string", "enum": ["red", "green"], "enumNames": ["Red", "Green"]},
    },
    "required": ["name"],
}


@pytest.fixture
def ask_form(user, conversation):
    """`ask_form()`: a running tool asks for a form (FORM). Returns its row."""

    def ask_form() -> Question:
        services.post_user_message(user=user, conversation_id=conversation.pk, text="Note")
        claim = turns.claim(conversation.pk, step_limit=10)
        call = ToolCallBlock(id="c0", name="mcp__notes__new_note_from_form", arguments={})
        turns.complete_step(claim.lease, text="", tool_calls=[call])
        request = ElicitationRequest(
            server="notes", call_id=call.id, message="Details, please", requested_schema=FORM
        )
        return asking.ask_elicitation(claim.lease, call, request, key="elicit_1")

    return ask_form


@pytest.fixture
def sweep(committed):
    """`sweep()`: rounds of the outbox's delivery, as every process runs them, until none of
    its attempts is still in flight (within a deadline)."""

    def sweep() -> None:
        deadline = time.monotonic() + 20
        with committed():
            delivery.deliver_due()
        while sum(delivery.in_flight.owners().values()) and time.monotonic() < deadline:
            with committed():
                delivery.deliver_due()

    return sweep
