"""The agent loop (chat.engine.runtime) and the turn state machine it drives
(chat.engine.turns): what a turn stores, how it fails, stops, retries and is taken over."""

import pytest
from asgiref.sync import async_to_sync

from chat import services
from chat.blocks import (
    ErrorBlock,
    NoticeBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    parse_blocks,
)
from chat.engine import runtime, turns
from chat.engine.providers.base import (
    CAUSE_PROVIDER_ERROR,
    ProviderError,
    TextDelta,
    ToolCallRequest,
)
from chat.engine.providers.scripted import ScriptedProvider
from chat.models import AgentState, Message, Role
from tests.factories import claim, lapse_lease, set_state, started_step
from tests.fakes import FakeProvider

pytestmark = pytest.mark.django_db


def blocks_of(conversation):
    return [(m.role, parse_blocks(m.blocks)) for m in conversation.messages.order_by("order")]


def assert_every_call_has_one_result(conversation):
    calls, results = [], []
    for _, blocks in blocks_of(conversation):
        calls += [b.id for b in blocks if isinstance(b, ToolCallBlock)]
        results += [b.tool_call_id for b in blocks if isinstance(b, ToolResultBlock)]
    assert sorted(calls) == sorted(results)
    assert len(set(results)) == len(results)


def test_a_multi_tool_turn_stores_calls_results_and_the_final_reply(conversation, user, post):
    post(user, conversation, "What time is it?")

    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert conversation.turn_steps == 2
    roles = [role for role, _ in blocks_of(conversation)]
    assert roles == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.ASSISTANT]
    _, asking = blocks_of(conversation)[1]
    assert [b.name for b in asking if isinstance(b, ToolCallBlock)] == [
        "current_time",
        "calculate",
    ]
    [(_, [clock]), (_, [product])] = blocks_of(conversation)[2:4]
    assert not clock.is_error
    assert product.content == "42"
    _, [final] = blocks_of(conversation)[4]
    assert "6 × 7 = **42**" in final.text
    assert clock.content[:10] in final.text
    assert_every_call_has_one_result(conversation)


def test_every_history_sent_pairs_each_tool_call_with_its_result(
    conversation, user, monkeypatch, use, post
):
    provider = use(ScriptedProvider())
    recorded = []
    original = provider.stream

    def recording(*, history, tools):
        recorded.append(history)
        return original(history=history, tools=tools)

    monkeypatch.setattr(provider, "stream", recording)
    post(user, conversation, "time please")
    post(user, conversation, "and again")

    assert len(recorded) == 3
    for history in recorded:
        for index, message in enumerate(history):
            calls = [b.id for b in message.blocks if isinstance(b, ToolCallBlock)]
            if calls:
                following = history[index + 1]
                assert following.role == "tool"
                assert [b.tool_call_id for b in following.blocks] == calls
        assert all(m.role in {"user", "assistant", "tool"} for m in history)


def test_unknown_tools_and_bad_arguments_become_error_results_and_the_turn_goes_on(
    conversation, user, use, post
):
    provider = use(
        FakeProvider(
            [
                ToolCallRequest("c1", "teleport", {}),
                ToolCallRequest("c2", "calculate", {"expression": 7}),
                ToolCallRequest("c3", "calculate", {"expression": "1/0"}),
            ],
            [TextDelta("Sorry, I will do better.")],
        ),
    )
    post(user, conversation, "go")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    results = [b for _, bs in blocks_of(conversation) for b in bs if b.type == "tool_result"]
    assert all(r.is_error for r in results)
    assert "Unknown tool 'teleport'" in results[0].content
    assert "Invalid arguments for calculate: expression" in results[1].content
    assert results[2].content == "Division by zero."
    # The model saw the errors and answered.
    assert [b.content for b in provider.histories[1][-1].blocks] == [r.content for r in results]


def test_retryable_failures_are_retried_and_the_reply_is_streamed_once(
    conversation, user, use, post, no_backoff
):
    provider = use(
        FakeProvider(
            ProviderError("HTTP 429", retryable=True),
            ProviderError("timeout", retryable=True),
            [TextDelta("Third "), TextDelta("time lucky.")],
        ),
    )
    post(user, conversation, "hi")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert len(provider.histories) == 3
    assert [blocks for role, blocks in blocks_of(conversation) if role == Role.ASSISTANT] == [
        [TextBlock(text="Third time lucky.")]
    ]


def test_when_retries_run_out_the_turn_fails_with_retry_and_nothing_is_lost(
    conversation, user, use, post, committed, no_backoff, settings
):
    settings.AGENT_RETRIES = 2
    failures = [
        ProviderError("HTTP 503", retryable=True, cause=CAUSE_PROVIDER_ERROR) for _ in range(3)
    ]
    provider = use(FakeProvider(*failures, [TextDelta("Back again.")]))
    post(user, conversation, "hi")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.ERROR
    assert len(provider.histories) == 3
    # (The step's draft, which never got text, stays as an empty, hidden message.)
    (user_role, [said]), (_, [error]) = [(r, b) for r, b in blocks_of(conversation) if b]
    assert (user_role, said.text) == (Role.USER, "hi")
    # The card says why, in words for people; the technical detail went to the log.
    assert error == ErrorBlock(
        message=turns.AGENT_FAILED, detail=CAUSE_PROVIDER_ERROR, retryable=True
    )

    with committed():
        services.retry_turn(user=user, conversation_id=conversation.pk)
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert blocks_of(conversation)[-1] == (Role.ASSISTANT, [TextBlock(text="Back again.")])
    # The retried request did not see the error block.
    assert [m.role for m in provider.histories[-1]] == ["user"]
    # The retry took the failed attempt's place: its card is no longer shown.
    [failed] = conversation.messages.filter(role=Role.SYSTEM)
    assert failed.shown_blocks == []


def test_a_non_retryable_failure_ends_the_turn_at_once(conversation, user, use, post, no_backoff):
    provider = use(FakeProvider(ProviderError("HTTP 401", retryable=False)))
    post(user, conversation, "hi")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.ERROR
    assert len(provider.histories) == 1


def test_the_step_limit_ends_a_looping_turn(conversation, user, use, post, settings):
    settings.AGENT_MAX_STEPS = 3
    loop = [ToolCallRequest(f"c{i}", "calculate", {"expression": "1+1"}) for i in range(5)]
    provider = use(FakeProvider(*[[call] for call in loop]))
    post(user, conversation, "loop")
    conversation.refresh_from_db()
    assert len(provider.histories) == 3
    assert conversation.agent_state == AgentState.ERROR
    _, [error] = blocks_of(conversation)[-1]
    assert error == ErrorBlock(message=turns.STEP_LIMIT, retryable=False)
    assert_every_call_has_one_result(conversation)


def running(conversation):
    set_state(conversation.pk, AgentState.LLM_REQUESTING)
    return claim(conversation.pk).lease


def test_a_lease_is_exclusive_until_it_lapses_and_then_fences_the_old_runner(conversation):
    first = running(conversation)
    assert first is not None
    assert claim(conversation.pk) is None
    lapse_lease(conversation.pk)
    assert turns.stale_runs() == [conversation.pk]
    takeover = claim(conversation.pk)
    # The new runner knows whose lease lapsed (this process: both claims are its own).
    assert takeover.taken_from == first.owner
    second = takeover.lease
    assert second.token > first.token
    with pytest.raises(turns.LeaseLost):
        turns.stream_text(first, "stale runner")
    turns.stream_text(second, "new runner")
    assert Message.objects.get().blocks == [{"type": "text", "text": "new runner"}]


def test_a_turn_waiting_in_the_workers_queue_is_sent_again_only_after_a_lease_period(
    conversation, user, settings, committed, dispatched
):
    # Under load, turns wait in the workers' queue; every sweep of every process sent each of
    # them again (a claim that finds it taken for nearly every turn, measured under 30 flows).
    settings.REDIS_URL = "redis://127.0.0.1:6379/15"
    with committed():
        services.post_user_message(user=user, conversation_id=conversation.pk, text="Hi")
    assert dispatched == [conversation.pk]
    assert turns.stale_runs() == []  # queued: the sweeps leave it to the queue

    lapse_lease(conversation.pk)
    assert turns.stale_runs() == [conversation.pk]  # the worker that took it died: sent again


def test_without_a_queue_a_turn_no_runner_took_is_the_sweeps_at_once(
    conversation, user, committed, dispatched
):
    with committed():
        services.post_user_message(user=user, conversation_id=conversation.pk, text="Hi")
    assert dispatched == [conversation.pk]
    assert turns.stale_runs() == [conversation.pk]


def test_any_runner_claims_a_queued_turn_at_once(conversation, user, settings, dispatched):
    settings.REDIS_URL = "redis://127.0.0.1:6379/15"
    services.post_user_message(user=user, conversation_id=conversation.pk, text="Hi")

    assert claim(conversation.pk) is not None
    assert claim(conversation.pk) is None  # and then it is held
    assert turns.stale_runs() == []


def test_stop_keeps_the_text_so_far_and_fences_out_the_runner(
    conversation, user, committed, dispatched
):
    lease = running(conversation)
    turns.begin_step(lease)
    turns.stream_text(lease, "Half a tho")

    services.stop_turn(user=user, conversation_id=conversation.pk)

    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    message, marker = Message.objects.order_by("order")
    assert (message.is_draft, parse_blocks(message.blocks)) == (
        False,
        [TextBlock(text="Half a tho")],
    )
    assert parse_blocks(marker.blocks) == [NoticeBlock(message=turns.STOPPED)]
    with pytest.raises(turns.LeaseLost):
        turns.stream_text(lease, "Half a thought")
    # The user can carry on at once.
    with committed():
        services.post_user_message(user=user, conversation_id=conversation.pk, text="hi")
    assert dispatched == [conversation.pk]


def test_stop_during_tools_gives_every_open_call_a_result(conversation, user):
    lease = running(conversation)
    calls = [ToolCallBlock(id=f"c{i}", name="calculate", arguments={}) for i in range(2)]
    turns.complete_step(lease, text="", tool_calls=calls)
    turns.record_tool_result(lease, ToolResultBlock(tool_call_id="c0", content="2"))

    services.stop_turn(user=user, conversation_id=conversation.pk)

    assert_every_call_has_one_result(conversation)
    _, [stopped] = blocks_of(conversation)[-2]
    assert (stopped.tool_call_id, stopped.is_error) == ("c1", True)


def test_a_tool_result_is_stored_once_even_if_recorded_twice(conversation):
    lease = running(conversation)
    turns.complete_step(
        lease, text="", tool_calls=[ToolCallBlock(id="c0", name="calculate", arguments={})]
    )
    result = ToolResultBlock(tool_call_id="c0", content="2")
    turns.record_tool_result(lease, result)
    turns.record_tool_result(lease, result)
    assert conversation.messages.filter(role=Role.TOOL).count() == 1


def test_a_turn_abandoned_mid_stream_is_resumed_once_by_another_runner(conversation, use):
    crashed = started_step(conversation.pk)
    turns.stream_text(crashed, "Partial reply from a runner that then di")
    lapse_lease(conversation.pk)  # the runner dies here
    use(FakeProvider([TextDelta("The whole reply.")]))
    async_to_sync(runtime.run_turn)(conversation.pk)

    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    messages = Message.objects.order_by("order")
    assert [(m.role, m.blocks, m.is_draft) for m in messages] == [
        (Role.ASSISTANT, [{"type": "text", "text": "The whole reply."}], False)
    ]


def test_a_turn_reads_no_state_between_its_steps_and_ends_with_its_lease_given_back(
    conversation, monkeypatch, use
):
    """Each step's change tells the runner what comes next (the tool calls it stored with
    it), and the last one gives the lease back: no read of the state or of those calls
    between steps, no release after the end (each a transaction and a thread hop, for every
    turn)."""
    set_state(conversation.pk, AgentState.LLM_REQUESTING)
    use(
        FakeProvider(
            [ToolCallRequest("call_1", "calculate", {"expression": "1+1"})], [TextDelta("Two.")]
        )
    )
    for name in ("current", "release", "pending_tool_calls"):
        monkeypatch.setattr(turns, name, lambda *_, name=name: pytest.fail(f"turns.{name}"))
    async_to_sync(runtime.run_turn)(conversation.pk)

    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert (conversation.lease_owner, conversation.lease_expires_at) == ("", None)
    assert blocks_of(conversation)[-1] == (Role.ASSISTANT, [TextBlock(text="Two.")])


def test_a_turn_abandoned_before_its_tools_ran_runs_them_once_under_another_runner(
    conversation, use
):
    """The step that stored the calls committed, then its runner died: the runner that takes
    the turn over reads the calls left (none were handed to it) and runs each once."""
    crashed = started_step(conversation.pk)
    call = ToolCallBlock(id="call_1", name="calculate", arguments={"expression": "6*7"})
    state = turns.complete_step(crashed, text="", tool_calls=[call])
    assert state.tool_calls == (call,)
    lapse_lease(conversation.pk)  # the runner dies here, before running the call
    use(FakeProvider([TextDelta("It is 42.")]))
    async_to_sync(runtime.run_turn)(conversation.pk)

    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    results = [b for _, bs in blocks_of(conversation) for b in bs if isinstance(b, ToolResultBlock)]
    assert [(r.tool_call_id, r.content) for r in results] == [("call_1", "42")]
    assert blocks_of(conversation)[-1] == (Role.ASSISTANT, [TextBlock(text="It is 42.")])


def test_missing_or_reused_tool_call_ids_are_replaced_so_each_call_gets_its_result(
    conversation, user, use, post
):
    provider = use(
        FakeProvider(
            [ToolCallRequest("call_0", "calculate", {"expression": "1+1"})],
            [ToolCallRequest("call_0", "calculate", {"expression": "2+2"})],
            [ToolCallRequest("bad/id", "calculate", {"expression": "3+3"})],
            [TextDelta("Done.")],
        ),
    )
    post(user, conversation, "go")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    calls = [b for _, bs in blocks_of(conversation) for b in bs if isinstance(b, ToolCallBlock)]
    assert calls[0].id == "call_0"
    assert len({c.id for c in calls}) == 3
    assert all(turns.TOOL_CALL_ID.fullmatch(c.id) for c in calls)
    assert_every_call_has_one_result(conversation)
    results = [
        b.content for _, bs in blocks_of(conversation) for b in bs if b.type == "tool_result"
    ]
    assert results == ["2", "4", "6"]
    assert len(provider.histories) == 4


def test_a_late_failure_cannot_override_a_paused_or_finished_turn(conversation):
    lease = running(conversation)
    turns.complete_step(lease, text="All done.", tool_calls=[])
    with pytest.raises(turns.LeaseLost):
        turns.fail(lease)
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    assert not any(isinstance(b, ErrorBlock) for _, bs in blocks_of(conversation) for b in bs)


def test_a_new_turn_retires_the_old_retry_button(conversation, user, use, post):
    use(FakeProvider(ProviderError("401", retryable=False), [TextDelta("Hi.")]))
    post(user, conversation, "hi")
    post(user, conversation, "again")
    errors = [b for _, bs in blocks_of(conversation) for b in bs if isinstance(b, ErrorBlock)]
    assert [e.retryable for e in errors] == [False]
