"""The real openai and anthropic SDKs against local fake servers, over real HTTP."""

import json

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async as db

from chat import services
from chat.blocks import TextBlock, ToolCallBlock, ToolResultBlock, parse_blocks
from chat.engine import providers, tools
from chat.engine.providers.base import CAUSE_CREDENTIALS, CAUSE_UNREACHABLE
from chat.models import AgentState, Role
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_llm():
    server = FakeLLM()
    yield server
    server.close()


@pytest.fixture(params=["openai", "anthropic"])
def provider(request, settings, fake_llm, no_backoff):
    settings.AGENT_PROVIDER = request.param
    settings.AGENT_MODEL = "fake-model"
    if request.param == "openai":
        settings.OPENAI_BASE_URL = f"{fake_llm.url}/v1"
        settings.OPENAI_API_KEY = "sk-test"
    else:
        settings.ANTHROPIC_BASE_URL = fake_llm.url
        settings.ANTHROPIC_API_KEY = "sk-ant-test"
    return request.param


def transcript(conversation):
    return [(m.role, parse_blocks(m.blocks)) for m in conversation.messages.order_by("order")]


def test_streamed_text_becomes_the_reply(provider, fake_llm, conversation, user, post):
    fake_llm.queue({"text": "Hello from a real SDK."})
    post(user, conversation, "hi")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert transcript(conversation)[-1] == (
        Role.ASSISTANT,
        [TextBlock(text="Hello from a real SDK.")],
    )
    [request] = fake_llm.requests
    assert request["body"]["model"] == "fake-model"
    assert request["body"]["stream"] is True
    tool_names = [
        t["function"]["name"] if provider == "openai" else t["name"]
        for t in request["body"]["tools"]
    ]
    assert {"current_time", "calculate"} <= set(tool_names)
    if provider == "openai":  # posted without the SDK's typed method: still with the key
        assert request["path"] == "/v1/chat/completions"
        assert request["headers"]["authorization"] == "Bearer sk-test"


def test_several_tool_calls_in_one_turn_then_the_answer(
    provider, fake_llm, conversation, user, post
):
    fake_llm.queue(
        {
            "text": "Two sums.",
            "tool_calls": [
                {"id": "call_a", "name": "calculate", "arguments": '{"expression": "6 * 7"}'},
                {"id": "call_b", "name": "calculate", "arguments": '{"expression": "2 ** 5"}'},
            ],
        },
        {"text": "42 and 32."},
    )
    post(user, conversation, "sums")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    roles_and_blocks = transcript(conversation)
    assert roles_and_blocks[1] == (
        Role.ASSISTANT,
        [
            TextBlock(text="Two sums."),
            ToolCallBlock(id="call_a", name="calculate", arguments={"expression": "6 * 7"}),
            ToolCallBlock(id="call_b", name="calculate", arguments={"expression": "2 ** 5"}),
        ],
    )
    assert roles_and_blocks[2:4] == [
        (Role.TOOL, [ToolResultBlock(tool_call_id="call_a", content="42")]),
        (Role.TOOL, [ToolResultBlock(tool_call_id="call_b", content="32")]),
    ]
    assert roles_and_blocks[4] == (Role.ASSISTANT, [TextBlock(text="42 and 32.")])

    # The second request carried both calls and both results in the provider's own format.
    second = fake_llm.requests[1]["body"]["messages"]
    if provider == "openai":
        assistant, result_a, result_b = second[-3:]
        assert [c["id"] for c in assistant["tool_calls"]] == ["call_a", "call_b"]
        assert (result_a["role"], result_a["tool_call_id"], result_a["content"]) == (
            "tool",
            "call_a",
            "42",
        )
        assert result_b["tool_call_id"] == "call_b"
    else:
        assistant, results = second[-2:]
        assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
        assert results["role"] == "user"
        assert [(b["type"], b["tool_use_id"]) for b in results["content"]] == [
            ("tool_result", "call_a"),
            ("tool_result", "call_b"),
        ]


@pytest.mark.parametrize("status", [429, 500, 503])
def test_server_errors_are_retried(provider, fake_llm, conversation, user, post, status):
    fake_llm.queue({"status": status}, {"text": "Recovered."})
    post(user, conversation, "hi")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert len(fake_llm.requests) == 2
    assert transcript(conversation)[-1] == (Role.ASSISTANT, [TextBlock(text="Recovered.")])


def test_malformed_tool_call_json_is_retried(provider, fake_llm, conversation, user, post):
    fake_llm.queue(
        {"tool_calls": [{"id": "call_x", "name": "calculate", "arguments": "{nope: }"}]},
        {"text": "Second try."},
    )
    post(user, conversation, "hi")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert len(fake_llm.requests) == 2
    assert [r for r, _ in transcript(conversation)] == [Role.USER, Role.ASSISTANT]


@pytest.mark.parametrize(
    "chunk",
    [
        {"choices": [{"index": 0, "delta": {"content": 5}}]},
        {"choices": "nope"},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": "0", "id": "c"}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": ["nope"]}}]},
        ["not", "an", "object"],
    ],
)
def test_a_malformed_stream_chunk_is_retried(
    fake_llm, conversation, user, post, settings, no_backoff, chunk
):
    """The stream's chunks are read from their JSON (chat.engine.providers.openai.chunk_parts):
    one of another shape fails the request as malformed tool-call JSON does, and it is retried."""
    settings.AGENT_PROVIDER, settings.AGENT_MODEL = "openai", "fake-model"
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = f"{fake_llm.url}/v1", "sk-test"
    fake_llm.queue({"chunks": [chunk]}, {"text": "Second try."})
    post(user, conversation, "hi")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert len(fake_llm.requests) == 2
    assert transcript(conversation)[-1] == (Role.ASSISTANT, [TextBlock(text="Second try.")])


def test_an_auth_error_is_not_retried_and_shows_an_error(
    provider, fake_llm, conversation, user, post
):
    fake_llm.queue({"status": 401})
    post(user, conversation, "hi")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.ERROR
    assert len(fake_llm.requests) == 1
    [error] = transcript(conversation)[-1][1]
    # The card says why in words for people, with the SDK's real error behind it.
    assert (error.type, error.detail) == ("error", CAUSE_CREDENTIALS)


def test_an_unreachable_provider_says_so(provider, fake_llm, conversation, user, post, settings):
    settings.AGENT_RETRIES = 0
    fake_llm.close()  # nothing listens there any more
    post(user, conversation, "hi")
    [error] = transcript(conversation)[-1][1]
    assert (error.type, error.detail) == ("error", CAUSE_UNREACHABLE)


def tool_names(provider, request) -> set[str]:
    offered = request["body"].get("tools", [])
    return {t["function"]["name"] if provider == "openai" else t["name"] for t in offered}


# Committed for real: the parent's turn waits for its sub-agent's, which is dispatched when
# the spawn commits; in a test that rolls back, it would be dispatched only after the parent's
# turn ended (the `committed` fixture runs what a block's commits ask for as the block ends).
@pytest.mark.django_db(transaction=True)
def test_a_subagent_is_offered_no_question_tool_nor_spawn_agents_and_is_refused_asking(
    provider, fake_llm, conversation, user
):
    spawn = {"tasks": [{"task": "Find the answer.", "title": "Finder"}]}
    invented = {"questions": [{"question": "Which?", "options": [{"label": "A"}, {"label": "B"}]}]}
    fake_llm.queue(
        {"tool_calls": [{"id": "call_s", "name": "spawn_agents", "arguments": json.dumps(spawn)}]},
        # The sub-agent invents a question call, although it was not offered one.
        {
            "tool_calls": [
                {"id": "call_q", "name": "ask_user_question", "arguments": json.dumps(invented)}
            ]
        },
        {"text": "The answer is 42."},
        {"text": "The sub-agent says 42."},
    )
    services.post_user_message(user=user, conversation_id=conversation.pk, text="delegate")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    parent_first, child_first, child_second, parent_second = fake_llm.requests
    question_tools = {"question", "ask_user_question", "confirm_action"}
    assert question_tools | {"spawn_agents", "calculate"} <= tool_names(provider, parent_first)
    for request in (child_first, child_second):
        offered = tool_names(provider, request)
        assert "calculate" in offered
        assert not offered & (question_tools | {"spawn_agents"})
    # The child's first message is its task; its next request carries the refusal.
    assert "Find the answer." in json.dumps(child_first["body"]["messages"])
    refusal = tools.registered("ask_user_question").subagent_refusal
    assert refusal in json.dumps(child_second["body"]["messages"])
    child = conversation.children.get()
    assert child.agent_state == AgentState.IDLE
    assert transcript(child)[-1] == (Role.ASSISTANT, [TextBlock(text="The answer is 42.")])
    [(_, [result])] = [(r, b) for r, b in transcript(conversation) if r == Role.TOOL]
    assert result == ToolResultBlock(
        tool_call_id="call_s", content="Sub-agent 1 (Finder) finished:\nThe answer is 42."
    )
    assert "Sub-agent 1 (Finder) finished" in json.dumps(parent_second["body"]["messages"])
    assert transcript(conversation)[-1] == (
        Role.ASSISTANT,
        [TextBlock(text="The sub-agent says 42.")],
    )


def test_turns_on_one_event_loop_share_one_provider_and_its_client(
    provider, fake_llm, conversation, user, post, monkeypatch
):
    """Building a provider (an SDK client and its connection pool) costs more than a local
    model's first token: a process builds one per configuration, not one per turn."""
    built = []
    build = providers.build_provider
    monkeypatch.setattr(providers, "build_provider", lambda: built.append(1) or build())
    fake_llm.queue({"text": "First."}, {"text": "Second."})

    async def two_turns_on_this_loop():
        # Each turn is dispatched from the test's thread, as this loop's database work runs
        # there: it runs on this loop.
        for text in ("one", "two"):
            await db(post)(user, conversation, text)
        return providers.get_provider() is providers.get_provider()

    assert async_to_sync(two_turns_on_this_loop)()
    blocks = list(conversation.messages.values_list("blocks", flat=True))
    assert [b[0]["text"] for b in blocks if b[0]["type"] == "text"] == [
        "one",
        "First.",
        "two",
        "Second.",
    ]
    assert len(built) == 1


def test_a_changed_configuration_gets_a_new_provider(provider, settings):
    async def two():
        first = providers.get_provider()
        settings.AGENT_MODEL = "another-model"
        return first, providers.get_provider()

    first, second = async_to_sync(two)()
    assert first is not second
    assert second.model == "another-model"


def test_a_serving_process_imports_its_provider_before_the_first_turn(settings, monkeypatch):
    """Importing an SDK takes a second or more; done by the first turn, it would stall the
    event loop (every request and socket of the process) meanwhile."""
    import sys

    settings.AGENT_PROVIDER = "anthropic"
    monkeypatch.delitem(sys.modules, "chat.engine.providers.anthropic", raising=False)
    providers.preload()
    assert "chat.engine.providers.anthropic" in sys.modules


def test_a_serving_process_builds_the_provider_of_its_turns_before_the_first_turn(
    settings, monkeypatch
):
    """Building an SDK client (its TLS context, its transport) took the first turn after
    every start ~45 ms on the event loop: the warm-up builds the one that loop's turns use."""
    import asyncio

    settings.AGENT_PROVIDER = "openai"
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    built = []
    build = providers.build_provider
    monkeypatch.setattr(providers, "build_provider", lambda: built.append(build()) or built[-1])
    loop = asyncio.new_event_loop()
    try:
        providers.preload(loop)  # in the warm-up thread, before any turn
        assert len(built) == 1

        async def a_turn():
            return providers.get_provider()

        assert loop.run_until_complete(a_turn()) is built[0]
        assert loop.run_until_complete(a_turn()) is built[0]
        assert len(built) == 1
    finally:
        loop.close()
