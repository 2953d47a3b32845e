"""Sub-agents (chat.subagents): spawned by the top-level agent, run as their own turns in
child conversations, never asking the user; the parent's call gets every answer once."""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import transaction
from django.urls import reverse

from chat import runtime, selectors, services, subagents, transcript, turns
from chat.blocks import ToolCallBlock, ToolResultBlock, parse_blocks
from chat.errors import ConversationNotFound
from chat.models import AgentState, Conversation, Role
from chat.providers.base import TextDelta, ToolCallRequest
from chat.routing import websocket_urlpatterns
from tests.factories import add_message
from tests.fakes import FakeProvider

pytestmark = pytest.mark.django_db(transaction=True)


def blocks_of(conversation, role):
    return [
        block
        for message in conversation.messages.filter(role=role).order_by("order")
        for block in parse_blocks(message.blocks)
    ]


def results(conversation):
    return [b for b in blocks_of(conversation, Role.TOOL) if isinstance(b, ToolResultBlock)]


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
    with transaction.atomic():
        locked = transcript.lock(conversation.pk)
        transcript.append_message(locked, role=Role.ASSISTANT, blocks=[call])
        locked.agent_state = AgentState.TOOL_EXECUTING
        transcript.save_conversation(locked)
    return turns.claim(conversation.pk).lease, call


def test_spawning_is_idempotent_and_the_result_is_recorded_once(conversation, user, dispatched):
    lease, call = waiting_parent(conversation, user)
    tasks = [("One", "first task"), ("", "second task")]
    turns.spawn_subagents(lease, call, tasks)
    turns.spawn_subagents(lease, call, tasks)  # a runner that took over does it again
    children = list(conversation.children.order_by("subagent_index"))
    assert [c.pk for c in children][-2:] == dispatched[-2:]
    assert len(children) == 2
    assert subagents.outcome(conversation.pk, "call_s") is None  # still running
    for child in children:
        with transaction.atomic():
            turns.stop_turn(transcript.lock(child.pk))
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
def test_invalid_spawn_calls_get_an_error_result_and_start_nothing(
    conversation, user, monkeypatch, arguments
):
    fake = FakeProvider([ToolCallRequest("s1", "spawn_agents", arguments)], [TextDelta("ok")])
    monkeypatch.setattr(runtime, "get_provider", lambda: fake)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")
    conversation.refresh_from_db()
    [result] = results(conversation)
    assert result.is_error and result.content.startswith("Invalid arguments for spawn_agents")
    assert not Conversation.objects.filter(parent=conversation).exists()
    assert conversation.agent_state == AgentState.IDLE


def test_task_text_is_cleaned(conversation, user, monkeypatch):
    arguments = {"tasks": [{"task": "Do\u202e it\u200b\n\n now", "title": " A\u2066 b "}]}
    fake = FakeProvider(
        [ToolCallRequest("s1", "spawn_agents", arguments)], [TextDelta("child")], [TextDelta("ok")]
    )
    monkeypatch.setattr(runtime, "get_provider", lambda: fake)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")
    child = conversation.children.get()
    assert child.title == "A b"
    assert blocks_of(child, Role.USER)[0].text == "Do it\n\nnow"


def test_a_subagent_that_spawns_anyway_is_refused_and_finishes(conversation, user, monkeypatch):
    tasks = {"tasks": [{"task": "nested"}]}
    fake = FakeProvider(
        [ToolCallRequest("s1", "spawn_agents", {"tasks": [{"task": "child task"}]})],
        [ToolCallRequest("s2", "spawn_agents", tasks)],  # the child tries it
        [TextDelta("child done")],
        [TextDelta("parent done")],
    )
    monkeypatch.setattr(runtime, "get_provider", lambda: fake)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")
    child = conversation.children.get()
    [refused] = results(child)
    assert refused.is_error and refused.content == subagents.SUBAGENT_RESULT
    assert not child.children.exists()
    [result] = results(conversation)
    assert result.content == "Sub-agent 1 finished:\nchild done"


def test_stop_on_the_parent_stops_its_children(conversation, user, dispatched, monkeypatch):
    spawn = {"tasks": [{"task": "a"}, {"task": "b"}]}
    fake = FakeProvider([ToolCallRequest("s1", "spawn_agents", spawn)])
    monkeypatch.setattr(runtime, "get_provider", lambda: fake)
    services.post_user_message(user=user, conversation_id=conversation.pk, text="go")

    async def stop_while_the_parent_waits():
        # The children are dispatched but not run: the parent waits for them until Stop.
        parent = asyncio.ensure_future(runtime.run_turn(conversation.pk))
        for _ in range(100):
            if await subagents.db(conversation.children.exists)():
                break
            await asyncio.sleep(0.05)
        await subagents.db(services.stop_turn)(user=user, conversation_id=conversation.pk)
        await asyncio.wait_for(parent, 5)

    async_to_sync(stop_while_the_parent_waits)()
    conversation.refresh_from_db()
    assert conversation.agent_state == AgentState.IDLE
    [result] = results(conversation)
    assert result.content == turns.STOPPED_RESULT
    children = list(conversation.children.all())
    assert len(children) == 2
    for child in children:
        assert child.agent_state == AgentState.ERROR
        assert subagents.subagents_of(conversation)[0].status == "stopped"
        # Fenced: no runner can claim the child's turn any more.
        assert turns.claim(child.pk) is None


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
        await subagents.db(add_message)(first.pk, "Half way there")
        html = await communicator.receive_from()
        assert f'id="subagent-{first.pk}-body"' in html and "Half way there" in html
        assert f"subagent-{second.pk}" not in html
        assert await communicator.receive_nothing(0.3)
        await communicator.disconnect()

        # A child's own socket is refused: it is read through its parent only.
        child_socket = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/conversations/{first.pk}/"
        )
        child_socket.scope["user"] = user
        assert not (await child_socket.connect())[0]

    async_to_sync(watch)()


def test_the_admin_shows_children_under_the_parent(client, admin_user, conversation, user):
    services.post_user_message(user=user, conversation_id=conversation.pk, text="research")
    client.force_login(admin_user)
    url = reverse("admin:chat_conversation_change", args=[conversation.pk])
    response = client.get(url)
    assert response.status_code == 200, response
    html = response.content.decode()
    assert "Sub-agent 1: Clock" in html and "Sub-agent 2: Arithmetic" in html
    assert "Six times seven is **42**" in html
