"""The model's context window (chat.engine.window): however long a conversation grows, every
request fits in AGENT_CONTEXT_TOKENS by the estimate, keeps each tool call with its result
and a question with its answer, the system prompt and the newest user message, and tells the
model what was left out; a message that cannot fit fails the turn before anything is sent."""

import json

import pytest

from chat.blocks import ErrorBlock, TextBlock, ToolCallBlock, ToolResultBlock, parse_blocks
from chat.engine import tools, turns, window
from chat.engine.providers import SYSTEM_PROMPT
from chat.engine.providers.base import REPLY_TOKENS, HistoryMessage, TextDelta, ToolCallRequest
from chat.models import AgentState, Role
from questions import resolving as questions
from questions.payloads import Answer
from tests.fake_llm import FakeLLM
from tests.fakes import FakeProvider

pytestmark = pytest.mark.django_db

NOTE = "earlier messages of this conversation were left out"
WORDS = "the quick brown fox jumps over the lazy dog " * 8  # ~350 characters


@pytest.fixture
def fake_llm(settings, no_backoff):
    server = FakeLLM()
    settings.AGENT_PROVIDER, settings.AGENT_MODEL = "openai", "fake-model"
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = f"{server.url}/v1", "sk-test"
    yield server
    server.close()


@pytest.fixture
def budget(settings) -> int:
    """Room for about four of the test's turns beside the system prompt, tools and reply."""
    settings.AGENT_CONTEXT_TOKENS = window.fixed_tokens(tools.specs()) + 1_600
    return settings.AGENT_CONTEXT_TOKENS


def wire_tokens(body: dict) -> int:
    """The request as the model got it, estimated as chat.engine.window estimates it."""
    estimate = window.estimate_tokens
    total = REPLY_TOKENS
    for spec in body["tools"]:
        function = spec["function"]
        total += estimate(
            function["name"] + function["description"] + json.dumps(function["parameters"])
        )
    for message in body["messages"]:
        if message["role"] == "system":
            total += estimate(message["content"])
            continue
        total += window.MESSAGE_TOKENS + estimate(message.get("content") or "")
        for call in message.get("tool_calls") or []:
            total += estimate(call["function"]["name"]) + estimate(call["function"]["arguments"])
    return total


def assert_pairs_intact(messages: list[dict]) -> None:
    """Each tool call is followed by its one result, and each result follows its call."""
    open_calls: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] == open_calls.pop(0)
        else:
            assert open_calls == [], f"calls without results: {open_calls}"
            open_calls = [call["id"] for call in message.get("tool_calls") or []]
    assert open_calls == []


def test_a_long_conversation_fits_every_request_in_the_window(
    fake_llm, budget, conversation, user, post, committed
):
    pizza = {
        "question": "Which pizza?",
        "header": "Pizza",
        "options": [{"label": "Margherita"}, {"label": "Funghi"}],
    }
    # Turns whose call pauses for the person, and how they answer: a question (its call keeps
    # its answer) and a request to be allowed to act (its call keeps the decision).
    paused = {
        5: ("q5", "ask_user_question", {"questions": [pizza]}, "Margherita"),
        8: ("a8", "confirm_action", {"action": "Delete 23 unused test files"}, "Yes"),
    }
    for turn in range(12):
        if turn in paused:
            call_id, tool, arguments, label = paused[turn]
            call = {"id": call_id, "name": tool, "arguments": json.dumps(arguments)}
            fake_llm.queue({"tool_calls": [call]}, {"text": f"Done as you said. {WORDS}"})
            post(user, conversation, f"Question {turn}: {tool}. {WORDS}")
            with committed():
                questions.answer_question(
                    user=user,
                    conversation_id=conversation.pk,
                    tool_call_id=call_id,
                    answers=[Answer(labels=[label])],
                )
            continue
        arguments = json.dumps({"expression": f"{turn} * 7"})
        fake_llm.queue(
            {
                "text": "Let me work it out.",
                "tool_calls": [{"id": f"c{turn}", "name": "calculate", "arguments": arguments}],
            },
            {"text": f"Answer {turn}: {turn * 7}. {WORDS}"},
        )
        post(user, conversation, f"Question {turn}: what is {turn} times 7? {WORDS}")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE

    requests = [request["body"] for request in fake_llm.requests]
    assert len(requests) == 24
    for number, body in enumerate(requests):
        messages = body["messages"]
        assert wire_tokens(body) <= budget
        assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
        turn = number // 2
        newest_user = [m for m in messages if m["role"] == "user"][-1]
        assert newest_user["content"].startswith(f"Question {turn}:")
        assert_pairs_intact(messages[1:])
        if NOTE in json.dumps(messages):  # past the window: the oldest turns went, said so
            assert NOTE in messages[1]["content"]
            assert "Question 0:" not in json.dumps(messages)
        else:  # nothing is left out silently
            assert all(f"Question {t}:" in json.dumps(messages) for t in range(turn + 1))
    noted = [NOTE in json.dumps(body["messages"]) for body in requests]
    first = noted.index(True)
    assert first >= 4 and all(noted[first:])  # from the first request that needed it on
    # While the answered question was in the window, its answer was with it.
    with_question = [b for b in requests if "q5" in json.dumps(b["messages"])]
    assert with_question and all(
        any(
            m.get("tool_call_id") == "q5" and "Margherita" in m["content"] for m in body["messages"]
        )
        for body in with_question
    )


def test_a_message_too_long_for_the_window_fails_the_turn_before_any_request(
    fake_llm, settings, conversation, user, post
):
    settings.AGENT_CONTEXT_TOKENS = window.fixed_tokens(tools.specs()) + 100
    post(user, conversation, WORDS * 2)
    assert fake_llm.requests == []
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.ERROR
    error = parse_blocks(conversation.messages.get(role=Role.SYSTEM).blocks)[0]
    assert isinstance(error, ErrorBlock)
    assert (error.message, error.retryable) == (turns.CONTEXT_OVERFLOW, False)
    assert "the model's context holds" in error.detail


def test_without_agent_context_tokens_the_window_the_endpoint_reports_is_used(
    fake_llm, settings, conversation, user, post
):
    settings.AGENT_CONTEXT_TOKENS = None
    fake_llm.models["fake-model"] = {"max_model_len": window.fixed_tokens(tools.specs()) + 100}
    post(user, conversation, WORDS * 2)  # fits in 100,000, not in what the endpoint says
    assert fake_llm.requests == []
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.ERROR

    fake_llm.models.clear()  # a new provider (settings changed) that is told nothing
    settings.AGENT_MODEL = "other-model"
    fake_llm.queue({"text": "Fine."})
    conversation.agent_state = AgentState.IDLE
    conversation.save(update_fields=["agent_state"])
    post(user, conversation, WORDS * 2)  # 100,000 then
    assert len(fake_llm.requests) == 1


def text(t: str) -> list:
    return [TextBlock(text=t)]


def test_the_steps_of_the_running_turn_go_after_the_earlier_turns_and_the_newest_stays():
    call = ToolCallBlock(id="c1", name="calculate", arguments={"expression": "1"})
    result = ToolResultBlock(tool_call_id="c1", content="1")
    history = [
        HistoryMessage("user", text("old")),  # 0: an earlier turn
        HistoryMessage("assistant", text("old reply")),  # 1
        HistoryMessage("user", text("newest")),  # 2
        HistoryMessage("assistant", [call]),  # 3: first step
        HistoryMessage("tool", [result]),  # 4
        HistoryMessage("assistant", [call.model_copy(update={"id": "c2"})]),  # 5: newest step
        HistoryMessage("tool", [result.model_copy(update={"tool_call_id": "c2"})]),  # 6
    ]
    assert window._droppable(history) == [(0, 2), (3, 5)]


class SummarizingModel(FakeProvider):
    """Calls a tool and answers each turn; asked for a summary (a request without tools),
    answers with a numbered one."""

    def __init__(self):
        super().__init__()
        self.summaries = 0

    async def stream(self, *, history, tools):
        self.histories.append(history)
        if not tools:
            self.summaries += 1
            assert history[0].blocks[0].text.startswith(window.SUMMARY_PROMPT)
            yield TextDelta(f"Summary {self.summaries} of what was said.")
            return
        if history[-1].role == "user":
            yield TextDelta(f"Working on it. {WORDS}")
            yield ToolCallRequest(f"c{len(self.histories)}", "calculate", {"expression": "6*7"})
        else:
            yield TextDelta(f"It is 42. {WORDS}")


def test_with_agent_summarize_the_model_summarises_what_is_left_out_every_few_turns(
    settings, use, conversation, user, post
):
    settings.AGENT_SUMMARIZE = True
    settings.AGENT_CONTEXT_TOKENS = (
        window.fixed_tokens(tools.specs()) + window.SUMMARY_TOKENS + 2_000
    )
    model = use(SummarizingModel())
    for turn in range(16):
        post(user, conversation, f"Question {turn}: {WORDS}")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    asked = [
        h for h in model.histories if not h[0].blocks[0].text.startswith(window.SUMMARY_PROMPT)
    ]
    # Summaries came every few turns, not at every step, and each was kept and sent on.
    assert 2 <= model.summaries <= 8 < len(asked) // 2
    assert conversation.context_summary == f"Summary {model.summaries} of what was said."
    noted = [h for h in asked if "A summary of them" in h[0].blocks[0].text]
    assert noted and asked[-1] in noted
    assert f"Summary {model.summaries} of what was said." in asked[-1][0].blocks[0].text
    # A summary request carries the summary before it, for what is left out since.
    later = [h for h in model.histories if h[0].blocks[0].text.startswith(window.SUMMARY_PROMPT)][
        1:
    ]
    assert later and all(
        "(Summary of what came before: Summary" in h[0].blocks[0].text for h in later
    )
