"""Sub-agents (chat.engine.subagents): spawned by the top-level agent, run as their own turns
in child conversations, never asking the user; the parent's call gets every answer once.

The tests where sub-agents run are committed for real: the parent's turn waits for its
children's, which are dispatched when their spawn commits; in a test that rolls back, they
would be dispatched only after the parent's turn ended (the `committed` fixture runs what a
block's commits ask for as the block ends), which never comes."""

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async as db
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import transaction
from django.urls import reverse

from chat import selectors, services
from chat.blocks import ToolCallBlock, ToolResultBlock, parse_blocks
from chat.engine import dispatch, runtime, subagents, tools, turns
from chat.engine.providers.base import TextDelta, ToolCallRequest
from chat.errors import ConversationNotFound
from chat.models import AgentState, Conversation, Role
from chat.routing import websocket_urlpatterns
from chat.transcript import Transcript, lock
from tests.factories import add_message, claim
from tests.fakes import FakeProvider

# The sub-agents run while their parent waits (see above).
children_run = pytest.mark.django_db(transaction=True)


def blocks_of(conversation, role):
    return [
        block
        for message in conversation.messages.filter(role=role).order_by("order")
        for block in parse_blocks(message.blocks)
    ]


def results(conversation):
    return [b for b in blocks_of(conversation, Role.TOOL) if isinstance(b, ToolResultBlock)]


@children_run
def test_research_runs_two_subagents_and_reports_both_answers_in_order(conversation, user):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="research")
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    children = list(conversation.children.order_by("subagent_index"))
    assert [c.title for c in children] == ["Clock", "Arithmetic"]
    assert all(c.agent_state == AgentState.IDLE for c in children)
    assert all(c.owner == user for c in children)
    for child in children:
        roles = list(child.messages.order_by("order").values_list("role", flat=True))
        assert roles == ["user", "assistant", "tool", "assistant"]
    assert blocks_of(children[0], Role.USER)[0].text.startswith("Sub-task: check the clock")
    [result] = results(conversation)
    assert not result.is_error
    clock, arithmetic = result.content.split("\n\n")
    assert clock.startswith("Sub-agent 1 (Clock) finished:\nThe current time in UTC is **")
    assert arithmetic == (
        "Sub-agent 2 (Arithmetic) finished:\n"
        "Six times seven is **42**, worked out with the calculator tool."
    )
    final = blocks_of(conversation, Role.ASSISTANT)[-1].text
    assert final.startswith("Both sub-agents reported back.") and "**42**" in final


@children_run
def test_children_are_hidden_and_reachable_only_through_the_parent(conversation, user, client):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="research")
    child = conversation.children.first()
    assert list(selectors.conversations_for_user(user=user)) == [conversation]
    with pytest.raises(ConversationNotFound):
        selectors.conversation_for_user(user=user, conversation_id=child.pk)
    with pytest.raises(ConversationNotFound):
        services.post_user_message(user=user, conversation_id=child.pk, text="hi")
    client.force_login(user)
    assert client.get(f"/c/{child.pk}/").status_code == 404
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert page.count('class="block block-subagent"') == 2
    assert f'id="subagent-{child.pk}-status"' in page
    assert "Sub-agent 1: Clock" in page and "Sub-agent 2: Arithmetic" in page
    assert "Six times seven is <strong>42</strong>" in page


def waiting_parent(conversation, user) -> tuple[turns.Lease, ToolCallBlock]:
    """The conversation's turn at a spawn_agents call, claimed (its runner's lease)."""
    services.post_user_message(user=user, conversation_id=conversation.pk, text="hi")
    call = ToolCallBlock(id="call_s", name="spawn_agents", arguments={})
    with transaction.atomic(), Transcript(lock(conversation.pk)) as transcript:
        transcript.append(role=Role.ASSISTANT, blocks=[call])
        transcript.conversation.agent_state = AgentState.TOOL_EXECUTING
        transcript.touch()
    return claim(conversation.pk).lease, call


@pytest.mark.django_db
def test_spawning_is_idempotent_and_the_result_is_recorded_once(
    conversation, user, committed, dispatched
):
    lease, call = waiting_parent(conversation, user)
    tasks = [("One", "first task"), ("", "second task")]
    with committed():
        dispatch.on_commit(turns.spawn_subagents(lease, call, tasks))
        # A runner that took the turn over does it again.
        dispatch.on_commit(turns.spawn_subagents(lease, call, tasks))
    children = list(conversation.children.order_by("subagent_index"))
    assert len(children) == 2
    assert dispatched == [c.pk for c in children]  # each started once
    assert subagents.outcome(conversation.pk, "call_s") is None  # still running
    for child in children:
        with transaction.atomic(), Transcript(lock(child.pk)) as transcript:
            turns.stop_turn(transcript)
    result = subagents.outcome(conversation.pk, "call_s")
    turns.record_tool_result(lease, result)
    turns.record_tool_result(lease, result)
    assert len(results(conversation)) == 1


@pytest.mark.parametrize(
    "arguments",
    [
        {"tasks": []},
        {"tasks": [{"task": f"task {i}"} for i in range(5)]},
        {"tasks": [{"task": "x", "extra": 1}]},
        {"tasks": [{"task": "\u200b\u202e "}]},
        {"tasks": [{"task": "x" * 4001}]},
        {"tasks": [{"task": "x", "title": "t" * 81}]},
    ],
)
@pytest.mark.django_db
def test_invalid_spawn_calls_get_an_error_result_and_start_nothing(
    conversation, user, use, post, arguments
):
    use(FakeProvider([ToolCallRequest("s1", "spawn_agents", arguments)], [TextDelta("ok")]))
    post(user, conversation, "go")
    conversation.refresh_from_db()
    [result] = results(conversation)
    assert result.is_error and result.content.startswith("Invalid arguments for spawn_agents")
    assert not Conversation.objects.filter(parent=conversation).exists()
    assert conversation.agent_state == AgentState.IDLE


@children_run
def test_task_text_is_cleaned(conversation, user, use):
    arguments = {"tasks": [{"task": "Do\u202e it\u200b\n\n now", "title": " A\u2066 b "}]}
    use(
        FakeProvider(
            [ToolCallRequest("s1", "spawn_agents", arguments)],
            [TextDelta("child")],
            [TextDelta("ok")],
        )
    )
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")
    child = conversation.children.get()
    assert child.title == "A b"
    assert blocks_of(child, Role.USER)[0].text == "Do it\n\nnow"


@children_run
def test_a_subagent_that_spawns_anyway_is_refused_and_finishes(conversation, user, use):
    tasks = {"tasks": [{"task": "nested"}]}
    use(
        FakeProvider(
            [ToolCallRequest("s1", "spawn_agents", {"tasks": [{"task": "child task"}]})],
            [ToolCallRequest("s2", "spawn_agents", tasks)],  # the child tries it
            [TextDelta("child done")],
            [TextDelta("parent done")],
        )
    )
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")
    child = conversation.children.get()
    [refused] = results(child)
    spawn = tools.registered(subagents.TOOL_NAME)
    assert refused.is_error and refused.content == spawn.subagent_refusal
    assert not child.children.exists()
    [result] = results(conversation)
    assert result.content == "Sub-agent 1 finished:\nchild done"


@pytest.mark.django_db
def test_stop_on_the_parent_stops_its_children(conversation, user, dispatched, use, monkeypatch):
    use(FakeProvider([ToolCallRequest("s1", "spawn_agents", {"tasks": [{"task": "a"}] * 2})]))
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")
    # The children are dispatched but not run: the parent waits for them until Stop, which
    # the user presses once it waits (it looks whether its children are done).
    monkeypatch.setattr(subagents, "RECHECK_SECONDS", 0.01)
    outcome = subagents.outcome

    def stop_once_waiting(parent_id, call_id):
        if conversation.children.exists() and Conversation.objects.get(pk=parent_id).is_running:
            services.stop_turn(user=user, conversation_id=conversation.pk)
        return outcome(parent_id, call_id)

    monkeypatch.setattr(subagents, "outcome", stop_once_waiting)
    async_to_sync(runtime.run_turn)(conversation.pk)

    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    [result] = results(conversation)
    assert result.content == turns.STOPPED_RESULT
    children = list(conversation.children.all())
    assert len(children) == 2
    assert [s.status for s in selectors.subagents_of(conversation)] == ["stopped", "stopped"]
    for child in children:
        assert child.agent_state == AgentState.ERROR
        # Fenced: no runner can claim the child's turn any more.
        assert claim(child.pk) is None


# Committed for real: the socket's consumer reads the database on a thread of its own.
@pytest.mark.django_db(transaction=True)
def test_a_childs_changes_stream_into_the_parents_socket(conversation, user, dispatched):
    lease, call = waiting_parent(conversation, user)
    turns.spawn_subagents(lease, call, [("One", "first task"), ("Two", "second task")])
    first, second = conversation.children.order_by("subagent_index")
    conversation.refresh_from_db()

    async def watch():
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/conversations/{conversation.pk}/"
        )
        communicator.scope["user"] = user
        assert (await communicator.connect())[0]
        # Up to date with the parent: only the children's sections are sent, once.
        await communicator.send_json_to({"type": "sync", "after": conversation.seq})
        html = await communicator.receive_from()
        for child in (first, second):
            assert f'<span id="subagent-{child.pk}-status" ' in html
            assert f'<ol id="subagent-{child.pk}-body" ' in html
        assert "Working…" in html and "first task" in html
        await db(add_message)(first.pk, "Half way there")
        html = await communicator.receive_from()
        assert f'id="subagent-{first.pk}-body"' in html and "Half way there" in html
        assert f"subagent-{second.pk}" not in html
        # Nothing more for that change: the next push is the one for a later change.
        await db(add_message)(second.pk, "Started on it")
        html = await communicator.receive_from()
        assert f'id="subagent-{second.pk}-body"' in html and "Started on it" in html
        assert "Half way there" not in html
        await communicator.disconnect()

        # A child's own socket is refused: it is read through its parent only.
        child_socket = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/conversations/{first.pk}/"
        )
        child_socket.scope["user"] = user
        assert not (await child_socket.connect())[0]

    async_to_sync(watch)()


@children_run
def test_the_admin_shows_children_under_the_parent(client, admin_user, conversation, user):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="research")
    client.force_login(admin_user)
    url = reverse("admin:chat_conversation_change", args=[conversation.pk])
    response = client.get(url)
    assert response.status_code == 200, response
    html = response.content.decode()
    assert "Sub-agent 1: Clock" in html and "Sub-agent 2: Arithmetic" in html
    assert "Six times seven is **42**" in html


@pytest.mark.django_db
def test_subagents_past_their_own_cap_are_refused_to_the_model_and_none_starts(
    conversation, user, use, post, settings
):
    settings.PARLEY_MAX_RUNNING_SUBAGENTS = 2
    busy = services.create_conversation(owner=user, title="Busy")
    Conversation.objects.create(
        owner=user, parent=busy, parent_tool_call_id="c0", agent_state=AgentState.LLM_REQUESTING
    )
    two = {"tasks": [{"task": f"task {i}"} for i in range(2)]}
    provider = use(
        FakeProvider([ToolCallRequest("s1", "spawn_agents", two)], [TextDelta("I will do it")])
    )
    post(user, conversation, "go")
    conversation.refresh_from_db()
    [result] = results(conversation)
    assert result.is_error
    assert result.content == (
        "At most 2 sub-agents may run at once for this user, and 1 are running now. "
        "Start at most 1, or do the tasks yourself."
    )
    assert provider.histories[1][-1].blocks[0].content == result.content  # the model read it
    assert not conversation.children.exists()
    assert conversation.agent_state == AgentState.IDLE


@pytest.mark.django_db
def test_running_subagents_do_not_take_the_turn_slots_people_use(
    conversation, user, post, settings
):
    settings.PARLEY_MAX_RUNNING_TURNS = 1
    busy = services.create_conversation(owner=user, title="Busy")
    for index in range(3):
        Conversation.objects.create(
            owner=user,
            parent=busy,
            parent_tool_call_id="c0",
            subagent_index=index,
            agent_state=AgentState.LLM_REQUESTING,
        )
    post(user, conversation, "hello")  # not refused: only top-level turns count here
    assert conversation.messages.filter(role=Role.ASSISTANT).exists()
